// The head page (#/): the log head, its signed note and, with a verified
// head, its age (the last entry re-hashed and proven included).

import { fetchEntry, proveEntry } from "./api.js";
import { decodeLeaf } from "./envelope.js";
import { b64encode, CheckFailed, toHex } from "./merkle.js";
import { check, fill, h, kv, main, microsAgo, unverifiedReason } from "./ui.js";

export async function headPage(hd, alive, gen) {
  const cp = hd.signed; // shown; checks use hd.checkpoint, the verified head
  const served = hd.served;
  const age = check("check-head-age", "Age of the head:", gen);
  fill(main,
    h("h1", {}, "Log head"),
    kv([
      ["origin", h("code", {}, cp?.origin ?? served?.origin ?? "?")],
      ["tree size", h("span", { id: "head-detail-size" }, String(cp?.size ?? served?.size ?? "?"))],
      ["root (hex)", h("code", { id: "head-detail-root" }, cp?.rootHex ?? (served ? toHex(served.root) : "?"))],
      ["root (base64, as signed)", h("code", {}, cp ? b64encode(cp.root) : served ? b64encode(served.root) : "?")],
      ["verified", h("span", { id: "head-verified" }, !cp
        ? "no"
        : !hd.checkpoint
          ? "no: signed by the pinned key, but NOT consistent with the head this browser trusted (nothing is checked against it)"
          : "yes: signed by the pinned key, checked in this browser")],
    ]),
    age.el,
    h("h2", {}, "The signed note"),
    h("pre", { class: "note", id: "head-note" }, hd.note),
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That the pinned key is the log's: it is the one thing trusted. Get it from the operator, not from this server."),
      h("li", {}, "That others see the same log: consistency is checked only against the last head this browser trusted. Witnesses and anchors kept elsewhere answer that (docs/WITNESS.md)."),
      h("li", {}, "That the server shows every entry: a server can withhold entries or answers; the log's shape is proven, its completeness only by a replay (ledger audit --projections)."),
      h("li", {}, "Witness cosignatures on the checkpoint are not checked here.")));
  const why = unverifiedReason(hd);
  if (why) {
    age.set("none", why);
    return;
  }
  const head = hd.checkpoint;
  if (head.size === 0) {
    age.set("none", "the log is empty");
    return;
  }
  await age.run(async () => {
    const last = head.size - 1;
    const e = await fetchEntry(last);
    if (!e.hashOk) throw new CheckFailed(`entry ${last}'s leaf does not hash to its stated leaf hash`);
    await proveEntry(last, e.leafHash, head);
    const d = decodeLeaf(e.leaf, `entry ${last}`);
    return `the last entry (${last}, ${d.kind}) was sequenced at ${d.sequencedAt} (${microsAgo(d.sequencedMicros)}, by the ledger's clock); its leaf and inclusion proof checked in this browser`;
  });
}
