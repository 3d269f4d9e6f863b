"""Which public function applies to which kind of model: encoders, decoders or both.

``SUPPORT`` maps every name of ``helpers.__all__`` that takes a model, an encoding
of one, a capture or a head's attention to ``(applies_to, note)``: "encoder", "decoder"
or "both", and what it does with the other kind. A function that does not apply
refuses with a clear error; none returns a bidirectional answer for a causal head
without saying so. The API page shows this table; ``tests/test_support.py`` runs every
entry on a tiny random BERT and a tiny random Llama and checks it does what it says, and
``tests/test_capture_mpnet.py`` runs the encoder entries on a tiny MPNet (all-mpnet-base-v2's
family): each runs, or, where its note says "BERT only" or "not yet MPNet", refuses it clearly.
"""

from __future__ import annotations

__all__ = ["APPLIES_TO", "SUPPORT"]

APPLIES_TO = ("encoder", "decoder", "both")

SUPPORT: dict[str, tuple[str, str]] = {
    "describe": ("both", "the architecture, causal or not"),
    "encode": ("both", "checks the tokenizer fits the model"),
    "tokens_of": ("both", "the tokenizer's own strings"),
    "capture": ("both", "Internals.causal says which; MPNet's position bias in Internals.position_bias"),
    "effective_attention_of": ("both", "bidirectional for an encoder, row by row (causal) for a decoder"),
    "effective_attention": (
        "both",
        "tensors in: the whole-sequence split; for a causal head's rows use causal_effective_attention",
    ),
    "causal_effective_attention": ("decoder", "refuses attention that is not causal"),
    "attention_bounds": ("encoder", "refuses a causal head's rows; bound row i on its prefix A[:i+1, :i+1]"),
    "alternative_family": ("encoder", "refuses causal attention (its alternatives would use future positions)"),
    "NullSpaceExplorer": ("encoder", "refuses causal attention"),
    "rank_sweep": ("both", "ranks of prefixes: what a causal row at that length sees"),
    "patch_attention": ("encoder", "BERT and MPNet; refuses other models"),
    "effective_attention_sweep": ("encoder", "refuses a decoder (one null space per row); see sink_sweep"),
    "collect_hidden_tokens": (
        "both",
        "every post-norm encoder (padded batches; ELECTRA's and ALBERT's x narrower than d) and every decoder "
        "(single texts, one capture each; x = the first block's input)",
    ),
    "probe_layers": ("both", "reads collect_hidden_tokens' output; the naive map needs x as wide as d"),
    "hidden_token_attribution": (
        "both",
        "every post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet) and Llama / Qwen2 decoders "
        "(zero above the diagonal); refuses GPT-2 (not yet linearised)",
    ),
    "attribute_examples": ("both", "a decoder: single texts (encode refuses a pair)"),
    "context_mixing": (
        "both",
        "every measure on the post-norm encoders (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet); on a "
        "decoder attention rollout, and HTA on Llama / Qwen2; the other measures refuse a decoder, saying why",
    ),
    "context_mixing_sweep": (
        "encoder",
        "every post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet); refuses a decoder, saying why",
    ),
    "fine_tune": ("encoder", "BERT only (a classifier on [CLS])"),
    "sink_sweep": ("decoder", "refuses a bidirectional model"),
}
