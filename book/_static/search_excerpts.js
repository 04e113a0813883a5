/* Search excerpts that read like the page.
 *
 * Sphinx's search quotes about 240 characters of the page around the first word found, taken
 * from the page's HTML as plain text. On these pages that text holds the source of every code
 * cell, the page's own table of contents and the buttons that fold code away, and inline math
 * is still TeX (\(\sqrt{d_k}\)), which only MathJax turns into symbols on the page itself. This
 * script drops those parts and writes math as symbols (√d_k) before the excerpt is cut, so a
 * result quotes the prose. Jupyter Book adds it to every page, before Sphinx's search script:
 * it waits for the document, and so for that script, and acts only where it is loaded.
 */
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;

  const NOT_PROSE = [
    ".cell_input", // a code cell's source
    ".cell_output", // and what it printed
    ".bd-sidebar-secondary", // the page's table of contents
    ".prev-next-area",
    "button",
    "nav",
  ].join(", ");

  const SYMBOLS = {
    sqrt: "√", times: "×", cdot: "·", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠",
    neq: "≠", approx: "≈", infty: "∞", sum: "Σ", prod: "Π", to: "→", rightarrow: "→",
    in: "∈", mid: "|", dots: "…", ldots: "…", cdots: "⋯", partial: "∂", nabla: "∇",
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε",
    eta: "η", theta: "θ", lambda: "λ", mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ",
    phi: "φ", psi: "ψ", omega: "ω", Delta: "Δ", Sigma: "Σ", top: "ᵀ",
  };

  // TeX source as plain text: \frac{a}{b} -> a/b, \sqrt{d_k} -> √d_k, \mathbf{x} -> x,
  // x_{t-1} -> x_t-1, other commands by their symbol or their name, spacing dropped.
  const plainMath = (tex) =>
    tex
      .replace(/^\\[([]|\\[)\]]$/g, "")
      .replace(/\\(?:left|right|big|Big|bigl|bigr)\b/g, "")
      .replace(/\\frac\s*{([^{}]*)}\s*{([^{}]*)}/g, "$1/$2")
      .replace(/\\(?:mathbf|mathrm|mathcal|mathbb|operatorname|text|textrm|boldsymbol)\s*{([^{}]*)}/g, "$1")
      .replace(/\^\s*{?\\top}?/g, "ᵀ")
      .replace(/\\([A-Za-z]+)/g, (whole, name) => SYMBOLS[name] ?? name)
      .replace(/\\[,;:! ]/g, " ")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();

  const sphinxHtmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(NOT_PROSE).forEach((element) => element.remove());
    page.querySelectorAll(".math").forEach((math) => {
      math.textContent = plainMath(math.textContent);
    });
    // one space for each run of blank lines and indentation: 240 characters of prose
    return sphinxHtmlToText(page.documentElement.outerHTML, anchor).replace(/\s+/g, " ");
  };
});
