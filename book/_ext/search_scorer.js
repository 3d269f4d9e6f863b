// The site search's scorer (Sphinx's html_search_scorer; book/_ext/search_ranking.py sets it): Sphinx's own
// weights, unchanged, and two rules on top.
// 1. A result on the glossary comes first (+50). A glossary term is also an index entry, which Sphinx scores
//    100 x (query length / entry length), so "leverage" finds its definition at the top.
// 2. For a plain word ("leverage"), an API entry (book/api*) loses 12 points, so that even one named exactly
//    that word (11 + 5 points: a function, or a dataclass field such as DrainSplit.leverage) ranks below a
//    chapter that uses the word (5 points): a reader asking for a concept gets its definition, then the
//    chapters, then the code. A query that looks like code (an underscore, a dot or a capital:
//    "effective_attention_of", "helpers.capture", "Internals") keeps Sphinx's scores, API entries first.
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (docname === "book/glossary") return score + 50;
    if (docname.startsWith("book/api")) {
      const query = (new URLSearchParams(window.location.search).get("q") || "").trim();
      return /[_.A-Z]/.test(query) ? score : score - 12;
    }
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
