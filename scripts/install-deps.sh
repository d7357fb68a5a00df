#!/usr/bin/env bash
# Installs everything rlc needs on Debian 12, from Debian's archive and the npm registry only.
# Usage: scripts/install-deps.sh            (build + runtime + test dependencies)
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
PKGS=(
  build-essential pkg-config
  libopenblas-openmp-dev        # sgemm (OpenMP build, so BLAS and our loops share one thread pool)
  libcjson-dev                  # JSON: config.json, safetensors headers, tokenizer.json, JSONL
  libyaml-dev                   # trainer configs
  libpcre2-dev libutf8proc-dev  # tokenizer pre-tokenizer regex + NFC
  libopenmpi-dev openmpi-bin    # data-parallel scale-out
  python3-torch python3-numpy   # independent numerical reference for tests (/usr/bin/python3)
  python3-jinja2                # the chat-template oracle: the engine transformers renders templates with
  librsvg2-bin                  # renders the SVG training curves in tests (proves a valid image)
  libsnappy-dev libzstd-dev zlib1g-dev  # Parquet datasets' codecs (SNAPPY, ZSTD, GZIP)
  protobuf-compiler python3-protobuf  # decode TensorBoard event files in tests, against TensorBoard's .proto files
  clang libclang-rt-dev libomp-dev    # libFuzzer targets (make fuzz): clang's fuzzer/sanitizer runtimes, its OpenMP
  bubblewrap                    # the sandbox of examples/envs/python_sandbox.py (model-written code in tool calls)
)
# Node.js + npm run the tokenizer oracle (HF tokenizers) and the chat-template oracle; take Debian's only if absent.
command -v npm >/dev/null || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# npm test oracles (tokenizer, chat template, Parquet writers) live in tests/node/node_modules (git-ignored).
if [ "${RLC_SKIP_NPM:-0}" != 1 ] && command -v npm >/dev/null; then
  # every dependency named in tests/node/package.json must be present
  for d in $(node -e 'console.log(Object.keys(require("./tests/node/package.json").dependencies).join("\n"))'); do
    if [ ! -f "tests/node/node_modules/$d/package.json" ]; then
      (cd tests/node && npm install --no-audit --no-fund --silent)
      break
    fi
  done
fi
echo "install-deps: ok"
