#!/usr/bin/env bash
# Fetch the browser assets the book needs so that the HTML works offline:
#   MathJax 3.2.2 (CommonHTML output, no speech-rule engine), require.js 2.3.8 and the
#   Jupyter widget manager @jupyter-widgets/html-manager 1.0.6 (embed-amd.js + its fonts);
#   and, for the browser test only, axe-core 4.14.1 (axe.min.js, the WCAG checker that
#   tests/test_browser.py injects into every page; never loaded by the book's pages).
#
# usage: bash scripts/vendor_assets.sh [DEST]      (DEST defaults to _vendor)
#
# The tarballs come from the npm registry (`npm pack`) and are checked against pinned sha256
# sums. DEST is wired into the book by _config.yml (html_static_path: ["_vendor"]), so its
# content is served under _static/ by the built HTML:
#   DEST/mathjax/tex-mml-chtml.js (+ input/, output/chtml/fonts/, a11y/, ui/)
#   DEST/widgets/require.js
#   DEST/widgets/embed-amd.js (+ the font files it loads relative to itself)
#   DEST/widgets/cdn/         local stand-in for data-jupyter-widgets-cdn (see below)
#   DEST/axe/axe.min.js       + LICENSE, LICENSE-3RD-PARTY.txt and VERSION (axe-core, MPL-2.0);
#                             excluded from _build/html/_static by exclude_patterns (_config.yml)
#   DEST/.complete            written last; its presence means the folder is usable
#
# About the widget "CDN": embed-amd.js bundles @jupyter-widgets/base, /controls and /output
# (the modules ipywidgets 8.1 saves as base 2.0.0, controls 2.0.0, output 1.0.0) and resolves
# them without any request. Only third-party widget libraries are fetched from
# `<data-jupyter-widgets-cdn><package>@<version>/dist/index.js`; the book points that
# attribute at DEST/widgets/cdn/ (book/_ext/offline_assets.py), so even an unknown module
# fails locally instead of reaching a CDN. To add such a library, put its AMD bundle at
# DEST/widgets/cdn/<package>@<version>/dist/index.js.
#
# Idempotent: if DEST/.complete records the same pins (and the same version of this script),
# nothing is done. Fails loudly (non-zero exit, message on stderr) on any error.
set -euo pipefail

DEST="${1:-_vendor}"

MATHJAX="mathjax@3.2.2"
REQUIREJS="requirejs@2.3.8"
HTMLMANAGER="@jupyter-widgets/html-manager@1.0.6"
AXE="axe-core@4.14.1"
# sha256 of the npm tarballs (npm pack output names)
declare -A SHA256=(
  [mathjax-3.2.2.tgz]=1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09
  [requirejs-2.3.8.tgz]=777158e89275e16bd51aec3ef714fbcb5dc45789e7078659933bc814916d7dec
  [jupyter-widgets-html-manager-1.0.6.tgz]=6c198ceb99ba7e7526990a1de16e8147ad7d3a714e3fb06741183623c04b5f6e
  [axe-core-4.14.1.tgz]=e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745
)
die() { echo "vendor_assets.sh: ERROR: $*" >&2; exit 1; }

command -v sha256sum >/dev/null 2>&1 || die "sha256sum is not installed."
# the stamp records the pins and this script's own hash: editing the script re-vendors
STAMP="$MATHJAX $REQUIREJS $HTMLMANAGER $AXE script:$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"

case "$DEST" in
  ""|"."|".."|"/"|"$HOME"|"$HOME/") die "refusing to use '$DEST' as the destination folder." ;;
esac
if [[ -d "$DEST" && -n "$(ls -A "$DEST")" && ! -f "$DEST/.complete" \
      && ! -d "$DEST/mathjax" && ! -d "$DEST/widgets" && ! -d "$DEST/axe" ]]; then
  die "$DEST exists, is not empty and was not written by this script; refusing to replace it."
fi

if [[ -f "$DEST/.complete" ]] && [[ "$(cat "$DEST/.complete")" == "$STAMP" ]]; then
  echo "vendor_assets.sh: $DEST is complete ($STAMP); nothing to do."
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm is not installed (needed to fetch $MATHJAX, $REQUIREJS, $HTMLMANAGER and $AXE from the npm registry)."
command -v tar >/dev/null 2>&1 || die "tar is not installed."

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "vendor_assets.sh: fetching $MATHJAX $REQUIREJS $HTMLMANAGER $AXE from the npm registry ..."
( cd "$TMP" && npm pack --loglevel=error "$MATHJAX" "$REQUIREJS" "$HTMLMANAGER" "$AXE" >/dev/null ) \
  || die "npm pack failed (is the npm registry reachable?)."

for tgz in "${!SHA256[@]}"; do
  [[ -f "$TMP/$tgz" ]] || die "npm pack did not produce $tgz."
  echo "${SHA256[$tgz]}  $TMP/$tgz" | sha256sum --check --quiet - \
    || die "sha256 mismatch for $tgz."
  mkdir -p "$TMP/x/${tgz%.tgz}"
  tar -xzf "$TMP/$tgz" -C "$TMP/x/${tgz%.tgz}"
done

# Assemble in a staging folder, then swap it in: a failed run never leaves a half-written DEST.
STAGE="$TMP/stage"
mkdir -p "$STAGE"

# --- MathJax: the combined TeX+MathML CommonHTML component and what it loads lazily ---
MJ="$TMP/x/mathjax-3.2.2/package/es5"
mkdir -p "$STAGE/mathjax/output/chtml/fonts"
cp "$MJ/tex-mml-chtml.js" "$STAGE/mathjax/"
cp -r "$MJ/input" "$STAGE/mathjax/"                    # TeX extensions for \require / autoload
cp -r "$MJ/output/chtml/fonts/woff-v2" "$STAGE/mathjax/output/chtml/fonts/"
cp -r "$MJ/a11y" "$MJ/ui" "$STAGE/mathjax/"            # menu + assistive MathML (no sre/)
cp "$TMP/x/mathjax-3.2.2/package/LICENSE" "$STAGE/mathjax/LICENSE"

# --- require.js ---
mkdir -p "$STAGE/widgets/cdn"
cp "$TMP/x/requirejs-2.3.8/package/require.js" "$STAGE/widgets/require.js"
cp "$TMP/x/requirejs-2.3.8/package/LICENSE" "$STAGE/widgets/LICENSE.requirejs" 2>/dev/null || true

# --- widget manager: embed-amd.js plus the fonts (Font Awesome, Lato) it loads from its
#     own folder (webpack public path = the folder embed-amd.js was loaded from) ---
HM="$TMP/x/jupyter-widgets-html-manager-1.0.6/package"
cp "$HM/dist/embed-amd.js" "$STAGE/widgets/"
cp "$HM/LICENSE" "$STAGE/widgets/LICENSE.html-manager"
nfonts=0
for f in $(grep -o '[0-9a-f]\{20\}\.\(woff2\|woff\|ttf\|eot\|svg\)' "$HM/dist/embed-amd.js" | sort -u); do
  [[ -f "$HM/dist/$f" ]] || die "embed-amd.js refers to $f, which the package does not ship."
  cp "$HM/dist/$f" "$STAGE/widgets/"
  nfonts=$((nfonts + 1))
done
(( nfonts > 0 )) || die "found no font files referenced by embed-amd.js."
echo "This folder stands in for the widget CDN; see scripts/vendor_assets.sh." \
  > "$STAGE/widgets/cdn/README.txt"

# --- axe-core: the accessibility engine of the browser test (tests/test_browser.py) ---
AX="$TMP/x/axe-core-4.14.1/package"
mkdir -p "$STAGE/axe"
cp "$AX/axe.min.js" "$AX/LICENSE" "$AX/LICENSE-3RD-PARTY.txt" "$STAGE/axe/"
echo "${AXE#axe-core@}" > "$STAGE/axe/VERSION"

# sanity checks
for f in mathjax/tex-mml-chtml.js mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff \
         mathjax/input/tex/extensions/ams.js widgets/require.js widgets/embed-amd.js \
         axe/axe.min.js axe/LICENSE; do
  [[ -s "$STAGE/$f" ]] || die "missing $f after extraction."
done

chmod -R a+rX "$STAGE"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$STAGE" "$DEST"
echo "$STAMP" > "$DEST/.complete"
echo "vendor_assets.sh: wrote $DEST ($(du -sh "$DEST" | cut -f1), $nfonts widget font files)."
