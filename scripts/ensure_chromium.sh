#!/usr/bin/env bash
# The rendered-book test drives Debian's headless Chromium. Install it when it is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
echo "installing Debian's chromium for the rendered-book test"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium
