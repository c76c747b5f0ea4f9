#!/bin/sh
# Prints the hash by which attnrun view's page allows FILE (its style or
# its script) in its Content-Security-Policy: the SHA-256 of the file's
# bytes in base64, as CSP writes it ("sha256-..."), from coreutils alone
# (sha256sum, basenc, base64).  The Makefile passes it to cmd/view/assets.c.
#
#   sh scripts/page-hashes.sh FILE
set -eu
digest=$(sha256sum <"$1" | cut -c1-64 | tr a-f A-F | basenc --base16 -d | base64)
printf 'sha256-%s\n' "$digest"
