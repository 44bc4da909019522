# A crate's layer (runtime = "cargo", built by image_build's test) served
# from a microVM: the runtime image plus the layer, nothing else.
# Payload: bin/mcpvm, kernel/vmlinux, images/ (index.json, the runtime
# image, the crate's layer), crate.toml and the .crate it names.
set -u
. ./case.sh
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"built_on"}}' > requests
case_ serve sh -c 'mcpvm run --timeout 300 --catalogue crate.toml --server crate-server --images images < requests'
