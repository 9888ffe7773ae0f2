// The Evidence Ledger explorer: routing and the start. What every page
// shares (the element helpers, the checks and the page status, the
// verified head, the head bar and the key banner) is in ui.js; each page
// is its own module: page-head.js, page-entries.js, page-classes.js (with
// rules.js), page-settings.js. The pages import ui.js, never this module.
//
// Nothing is shown as verified unless this browser verified it: each check
// has a stable id and a `data-status` of pending|ok|fail|none, and
// `#page[data-status]` is the page as a whole (ui.js says how).
//
// Routes (hash-based, so the server serves only fixed files):
//   #/                     the log head
//   #/entries[?start=N]    entries, 50 a page
//   #/entries/N            one entry
//   #/find/TEXT            an index, a leaf hash or an envelope id
//   #/classes              task classes
//   #/classes/NAME         one task class
//   #/settings             the pinned key, the read token, the trusted head
//
// Everything the server sends is put in the page as text (textContent),
// never as markup, and never into a class name (tiers map to a fixed set).

import { ApiError } from "./api.js";
import { CheckFailed } from "./merkle.js";
import {
  ensureHead, failPage, fill, finishPage, h, headBar, indexOfText, isCurrent, keyBanner, main, onRefresh, page, startPage,
} from "./ui.js";
import { headPage } from "./page-head.js";
import { entriesPage, entryPage, findPage } from "./page-entries.js";
import { classesPage, classPage } from "./page-classes.js";
import { settingsPage } from "./page-settings.js";

// --- routing ----------------------------------------------------------------------

async function route(refreshHead = false) {
  const gen = startPage();
  keyBanner();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query ?? "");
  let parts;
  try {
    parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    parts = ["?"];
  }
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("current", a.getAttribute("href").split("/")[1] === (parts[0] ?? ""));
  }
  fill(main, h("p", { class: "loading" }, "loading…"));
  const alive = () => isCurrent(gen);
  try {
    if (parts[0] === "settings") {
      await settingsPage(alive);
      if (alive()) finishPage();
      return;
    }
    const hd = await ensureHead(refreshHead);
    if (!alive()) return;
    headBar(hd, gen);
    if (parts.length === 0) await headPage(hd, alive, gen);
    else if (parts[0] === "entries" && parts.length === 1) await entriesPage(hd, indexOfText(params.get("start")), alive, gen);
    else if (parts[0] === "entries") await entryPage(hd, indexOfText(parts[1]), null, alive, gen);
    else if (parts[0] === "find") await findPage(hd, parts[1] ?? "", alive, gen);
    else if (parts[0] === "classes" && parts.length === 1) await classesPage(alive);
    else if (parts[0] === "classes") await classPage(hd, parts[1], alive, gen);
    else fill(main, h("p", {}, "No such page."));
  } catch (e) {
    if (!alive()) return;
    if (!(e instanceof CheckFailed)) console.error(e);
    let message = !(e instanceof ApiError)
      ? e.message
      : e.status
        ? `the server refused a request: ${e.message}`
        : `could not be checked: ${e.message}`;
    if (e instanceof ApiError && e.code === "read_token_required") message += " (set the read token on the Key & token page)";
    fill(main, h("p", { class: "error", id: "page-error" },
      e instanceof ApiError ? (e.status ? `The server answered: ${e.message}` : `The request failed: ${e.message}`) : `Error: ${e.message}`));
    failPage(message);
    return;
  }
  if (alive()) finishPage();
}

onRefresh(() => route(true));

// --- start -----------------------------------------------------------------------------

document.getElementById("search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = document.getElementById("search-input").value.trim();
  if (q) location.hash = `#/find/${encodeURIComponent(q)}`;
});
window.addEventListener("hashchange", () => route());
if (!window.isSecureContext || !crypto.subtle) {
  document.getElementById("main").replaceChildren(
    h("p", { class: "error", id: "page-error" }, "This page needs a secure context (https, or http on localhost) for WebCrypto; nothing can be verified here."));
  page.dataset.status = "fail";
} else {
  route();
}
