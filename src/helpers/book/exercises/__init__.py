"""The chapters' code exercises: ``checking`` holds the shared core, ``chNN`` each chapter's checks."""
