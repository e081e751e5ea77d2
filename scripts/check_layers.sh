#!/usr/bin/env bash
# Fails when a source file includes a header of a layer above its own (docs/architecture.md):
#   core < formats < tokenizer, runtime < ops < backend < model < parallel < engine < frontend
#   < server < bench, eval < tools, python (python/src: the extension module);
#   tokenizer < grammar < engine
# Each layer lists the layers it may include; include/inflight (the public API) includes only
# itself and is usable from the engine up.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [core]="core"
  [formats]="core formats"
  [tokenizer]="core formats tokenizer"
  [runtime]="core formats runtime"
  [ops]="core runtime ops"
  [backend]="core formats runtime ops backend"
  [model]="core formats runtime model"
  [parallel]="core formats runtime parallel"
  [grammar]="core formats tokenizer grammar"
  [engine]="core formats tokenizer grammar runtime model backend parallel engine inflight"
  [frontend]="core formats tokenizer grammar engine frontend inflight"
  [server]="core formats tokenizer grammar engine frontend server inflight"
  [bench]="core formats tokenizer grammar runtime backend model parallel engine bench inflight"
  [eval]="core formats tokenizer runtime backend model eval"
  [python]="core formats tokenizer engine frontend inflight"
  [inflight]="inflight"
)

status=0
check() {  # check LAYER FILE
  local layer=$1 file=$2 inc dir
  while IFS= read -r inc; do
    dir=${inc%%/*}
    [[ "$inc" == */* ]] || continue
    [[ -n "${allowed[$dir]+x}" || "$dir" == tools ]] || continue  # a system or library header
    if [[ " ${allowed[$layer]} " != *" $dir "* ]]; then
      echo "layering: $file ($layer) includes \"$inc\" ($dir is not below $layer)"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
}

for layer in "${!allowed[@]}"; do
  case $layer in
    inflight) root=include/inflight ;;
    python) root=python/src ;;
    *) root=src/$layer ;;
  esac
  [[ -d "$root" ]] || continue
  while IFS= read -r f; do check "$layer" "$f"; done \
    < <(find "$root" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \))
done
[[ $status -eq 0 ]] && echo "layering: every include points down"
exit $status
