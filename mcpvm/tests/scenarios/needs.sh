# Servers with needs (mcpvm/tests/fixtures/needs-catalogue.toml) in
# microVMs, run on real KVM by testbed/run: @playwright/mcp and
# chrome-devtools-mcp with Debian's Chromium in their layers, on a page
# the guest serves from the workspace on its loopback (needs =
# ["browser"]); server-postgres on the database its VM starts (needs =
# ["postgres"]).
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, needs.toml,
# page.html; the store (images/) on the second disk.
set -u
. ./case.sh
CASE_LIMIT=900
mkdir -p ws && cp page.html ws/page.html
# Chromium wants memory: 1.5 GiB a VM. Calls under nested emulation take
# tens of seconds (the first navigation starts the browser).
P="mcpvm probe --json --images images --mem 1536 --init-timeout 400 --step-timeout 300 --catalogue needs.toml --workspace ws --only-given"
URL=http://127.0.0.1:8080/page.html

# Open the page, type a name into its form and submit it, press its
# button, read the page back and take a screenshot: in this order.
case_ playwright $P --server playwright \
  --call "browser_navigate={\"url\":\"$URL\"}" \
  --call 'browser_type={"target":"e5","element":"Name textbox","text":"mcpvm","submit":true}' \
  --call 'browser_click={"target":"e6","element":"Greet button"}' \
  --call 'browser_snapshot={}' \
  --call 'browser_take_screenshot={"type":"png"}'
case_ chrome_devtools $P --server chrome-devtools \
  --call "navigate_page={\"pageId\":1,\"type\":\"url\",\"url\":\"$URL\"}" \
  --call 'take_snapshot={"pageId":1}' \
  --call 'take_screenshot={"pageId":1}'
# A page outside, under deny-net: the lookup is refused in the guest and
# recorded (no packet leaves the VM).
case_ outside $P --server playwright --profile deny-net \
  --call 'browser_navigate={"url":"http://example.com/"}'

# A database server on the PostgreSQL its VM starts (needs = ["postgres"],
# 512 MiB by the need): a real query over the seeded tables.
case_ postgres mcpvm probe --json --images images --init-timeout 400 --step-timeout 300 \
  --catalogue needs.toml --server postgres --only-given \
  --call 'query={"sql":"SELECT c.name, sum(o.amount) AS total FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.name ORDER BY total DESC"}'
