#!/usr/bin/env bash
# Fetch MathJax 3 from the npm registry and keep only what the book's pages load, so that math
# is typeset with no network when a page is read.
#
#   bash book/fetch_mathjax.sh DEST        (make book uses book/_mathjax/_static/mathjax)
#
# DEST ends up holding tex-chtml.js (the TeX-input, HTML-output bundle), the woff-v2 fonts, the
# TeX extensions that \require or autoload may ask for, and the accessibility and menu pieces the
# right-click menu loads on demand. _config.yml copies book/_mathjax/ into the site root through
# html_extra_path, so the pages load _static/mathjax/tex-chtml.js (Sphinx resolves
# mathjax_path: mathjax/tex-chtml.js under _static/).
#
# Needs npm and the registry once; the result is cached in DEST (and ignored by git).
# MATHJAX_VERSION overrides the pinned version.
set -euo pipefail

DEST=${1:?usage: fetch_mathjax.sh DEST}
VERSION=${MATHJAX_VERSION:-3.2.2}

command -v npm >/dev/null || { echo "fetch_mathjax.sh: npm is needed to fetch MathJax (apt-get install npm)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

( cd "$work" && npm pack --silent "mathjax@${VERSION}" >/dev/null )
tar -xzf "$work"/mathjax-*.tgz -C "$work"
src="$work/package/es5"
test -f "$src/tex-chtml.js" || { echo "fetch_mathjax.sh: no es5/tex-chtml.js in mathjax@${VERSION}" >&2; exit 1; }

stage="$work/stage"
mkdir -p "$stage/output/chtml/fonts" "$stage/input/tex"
cp "$src/tex-chtml.js" "$stage/"
cp -r "$src/output/chtml/fonts/woff-v2" "$stage/output/chtml/fonts/"
cp -r "$src/input/tex/extensions" "$stage/input/tex/"
cp -r "$src/a11y" "$src/ui" "$src/sre" "$stage/"
cp "$work/package/LICENSE" "$stage/LICENSE"
echo "mathjax@${VERSION} from the npm registry, trimmed by book/fetch_mathjax.sh" > "$stage/VERSION"

# Replace DEST in one step so an interrupted run never leaves half a copy behind.
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.partial"
mv "$stage" "$DEST.partial"
rm -rf "$DEST"
mv "$DEST.partial" "$DEST"
echo "MathJax ${VERSION} -> $DEST ($(du -sh "$DEST" | cut -f1))"
