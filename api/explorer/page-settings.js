// The settings page (#/settings): the pinned key, the read token, the trusted head.

import { getText, settings } from "./api.js";
import { parseVerifierKey } from "./note.js";
import { fill, forgetHead, h, keyBanner, main } from "./ui.js";

export async function settingsPage(alive) {
  document.getElementById("headbar").replaceChildren();
  const keyInput = h("textarea", { id: "key-input", rows: "2", spellcheck: "false", placeholder: "name+hash+base64 key, e.g. localhost/evidence-ledger+7c1dab72+AZ51…" }, settings.keyText() ?? "");
  const keyMsg = h("p", { id: "key-message", class: "msg" });
  const tokenInput = h("input", { id: "token-input", type: "password", autocomplete: "off", placeholder: "read token (optional)" });
  tokenInput.value = settings.token() ?? "";
  const tokenMsg = h("p", { id: "token-message", class: "msg" }, settings.token() ? "A read token is set." : "No read token is set.");
  const serverKey = h("code", { id: "server-key" }, "…");
  const text = settings.keyText();
  const trusted = text ? settings.trustedNote(text) : null;
  fill(main,
    h("h1", {}, "Key and token"),
    h("h2", {}, "Pinned verifier key"),
    h("p", {}, "The log's C2SP note verifier key, ", h("code", {}, "name+keyhash+base64"), ". Every check on these pages trusts this key and nothing else; it is kept in this browser (localStorage)."),
    keyInput,
    h("p", {},
      h("button", { id: "key-pin", type: "button", onclick: async () => {
        try {
          const k = await parseVerifierKey(keyInput.value);
          settings.setKey(k.text);
          keyMsg.dataset.status = "ok";
          keyMsg.textContent = `Pinned ${k.text}.`;
          forgetHead();
          keyBanner();
        } catch (e) {
          keyMsg.dataset.status = "fail";
          keyMsg.textContent = `Not pinned: ${e.message}`;
        }
      } }, "Pin this key"), " ",
      h("button", { id: "key-forget", type: "button", onclick: () => {
        settings.setKey(null);
        forgetHead();
        keyMsg.dataset.status = "none";
        keyMsg.textContent = "No key is pinned: nothing is verified.";
        keyBanner();
      } }, "Unpin")),
    keyMsg,
    h("p", { class: "hint" }, "The server names its key as ", serverKey, ". Compare it with the key the operator gave you; a server that is not trusted can name any key, so pinning what it names proves only that its answers agree with each other."),
    h("h2", {}, "Read token"),
    h("p", {}, "When the server has a read token, send it as ", h("code", {}, "Authorization: Bearer …"), " (kept in this browser)."),
    h("p", { class: "hint", id: "reader-token-hint" }, "A reader token (a token in the server's readers file, made with ", h("code", {}, "ledger reader-token"), ") goes here too: the server then sends each entry with the disclosures of its committed values, and the entry page checks each one against the leaf before it shows the value."),
    tokenInput, " ",
    h("button", { id: "token-save", type: "button", onclick: () => {
      settings.setToken(tokenInput.value.trim() || null);
      forgetHead();
      tokenMsg.textContent = settings.token() ? "A read token is set." : "No read token is set.";
    } }, "Save token"), " ",
    h("button", { id: "token-clear", type: "button", onclick: () => {
      settings.setToken(null);
      tokenInput.value = "";
      forgetHead();
      tokenMsg.textContent = "No read token is set.";
    } }, "Clear"),
    tokenMsg,
    h("h2", {}, "Trusted head"),
    h("p", { id: "trusted-head" }, trusted ? `This browser trusts the checkpoint of size ${trusted.split("\n")[1]} for the pinned key; every new head must be proven consistent with it.` : "No head is trusted yet for the pinned key: the next one verified is trusted on first use."),
    h("button", { id: "trusted-forget", type: "button", onclick: () => {
      const k = settings.keyText();
      if (k) settings.setTrustedNote(k, null);
      forgetHead();
      document.getElementById("trusted-head").textContent = "Forgotten: the next head verified is trusted on first use.";
    } }, "Forget the trusted head"));
  try {
    const named = (await getText("/v1/log/key")).trim();
    if (alive()) serverKey.textContent = named;
  } catch (e) {
    if (alive()) serverKey.textContent = `(unavailable: ${e.message})`;
  }
}
