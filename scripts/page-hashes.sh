#!/bin/sh
# Prints the C header of the hashes that attnrun view's page allows in its
# Content-Security-Policy: for each NAME=FILE, the SHA-256 of the file's
# bytes, base64, as CSP writes it ("sha256-..."), from coreutils alone
# (sha256sum, basenc, base64).  Run by the Makefile into build/gen/.
set -eu
echo "/* made by scripts/page-hashes.sh: do not edit */"
for pair in "$@"; do
    name=${pair%%=*}
    file=${pair#*=}
    digest=$(sha256sum <"$file" | cut -c1-64 | tr a-f A-F | basenc --base16 -d | base64)
    printf '#define %s "sha256-%s"\n' "$name" "$digest"
done
