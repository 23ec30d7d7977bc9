// The web page at / (index.html): sends the Spanish to POST v1/translate with a word-level
// alignment and shows the English, each sentence's α as a heatmap (rows: English words, columns:
// Spanish words), the hard links on hover or focus, the n-best list and the quality flag. Where
// the server translates several language pairs, the direction chosen (the default model's pair
// first) goes with the request as sourceLanguage and targetLanguage, and names the two sides.
//
// Everything the model or the user wrote is inserted with createTextNode or as an attribute
// value, never parsed as markup: an HTML-mode translation is shown with its tags as text.
"use strict";

const ALIGNMENT = "ALIGNMENT_WORDS";    // α at word level: one row per target word, one weight per source word
const END = "</s>";                     // the last source and target word; it has α but no hard links

const $ = (id) => document.getElementById(id);

// An element with attributes and children; strings become text nodes, never markup.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const fixed = (x, digits = 2) => Number(x).toFixed(digits);

// The language pair the page translates (ISO 639-1 codes): Spanish to English, unless the server
// serves several pairs and another is chosen (chooseDirection).
const pair = { source: "es", target: "en" };
let servedModels = [];          // GET v1/models
let servedPairs = [];           // their pairs, the default model's first
const PLACEHOLDER = document.getElementById("source").placeholder;     // a Spanish example

const NAMES = (() => {
  try {
    return new Intl.DisplayNames(["en"], { type: "language" });
  } catch {
    return null;
  }
})();

// "es" -> "Spanish"; the code itself where the browser does not know it.
function languageName(code) {
  try {
    return NAMES?.of(code) ?? code;
  } catch {
    return code;
  }
}

// --- the request -------------------------------------------------------------

class InputError extends Error {}

// "spanish = english" lines; blank lines and lines starting with # are skipped.
function parseGlossary(text) {
  const entries = [];
  text.split("\n").forEach((line, i) => {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith("#")) return;
    const eq = trimmed.indexOf("=");
    const source = eq < 0 ? "" : trimmed.slice(0, eq).trim();
    const target = eq < 0 ? "" : trimmed.slice(eq + 1).trim();
    if (!source || !target) throw new InputError(`Glossary line ${i + 1}: write it as “spanish = english”.`);
    entries.push({ source, target });
  });
  return entries;
}

function positiveInt(input, name) {
  const value = Number(input.value);
  if (!Number.isInteger(value) || value < 1) throw new InputError(`${name} must be a whole number from 1 up.`);
  return value;
}

function buildRequest() {
  const text = $("source").value;
  if (!text.trim()) throw new InputError(`Type or paste some ${languageName(pair.source)} first.`);
  const request = {
    sentences: [text],
    options: { beamSize: positiveInt($("beam-size"), "Beam size"), nBest: positiveInt($("n-best"), "Alternatives"),
               alignment: ALIGNMENT },
    format: $("html").checked ? "TEXT_FORMAT_HTML" : "TEXT_FORMAT_PLAIN",
    splitSentences: $("split").checked,
    glossary: parseGlossary($("glossary").value),
  };
  if (!$("direction-option").hidden) {
    request.sourceLanguage = pair.source;
    request.targetLanguage = pair.target;
  }
  // the model select lists the chosen pair's models only: the name and the pair agree
  if (!$("model-option").hidden && $("model").value) request.model = $("model").value;
  return request;
}

// --- calling the server ------------------------------------------------------

class ServerError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

async function post(path, body) {
  let response;
  try {
    response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                                   body: JSON.stringify(body) });
  } catch (e) {
    throw new ServerError(`The server could not be reached (${e.message}).`, "UNAVAILABLE");
  }
  const reply = await response.json().catch(() => null);
  if (response.ok && reply) return reply;
  // {"error": {"code": "INVALID_ARGUMENT", "message": "..."}} from the native API
  const error = reply?.error ?? {};
  let message = error.message || `The server answered ${response.status} ${response.statusText}.`;
  const retry = response.headers.get("Retry-After");
  if (retry) message += ` Try again in ${retry} s.`;
  throw new ServerError(message, error.code || String(response.status));
}

// --- rendering ---------------------------------------------------------------

// The sentences of one translated entry: a document (split or HTML) lists them in `sentences`,
// a single sentence is the entry itself; an empty entry has none.
function sentencesOf(translation) {
  if (translation.sentences.length) {
    return translation.sentences.map((s) => s.translation).filter((t) => t.hypotheses.length);
  }
  return translation.hypotheses.length ? [translation] : [];
}

function words(list, side, sentence, lang) {
  const line = el("p", { class: `words ${side}`, lang });
  list.forEach((word, i) => {
    if (word === END) return;
    if (line.childNodes.length) line.append(" ");
    line.append(el("span", { class: "word", tabindex: "0", "data-side": side, "data-index": String(i),
                             "data-sentence": String(sentence) }, word));
  });
  return line;
}

function qualityLine(hypothesis) {
  const score = fixed(hypothesis.quality.score);
  if (hypothesis.suspect) {
    return el("p", { class: "flag suspect", "data-suspect": "true" },
              el("strong", {}, "suspect:"), ` this translation may be wrong (quality score ${score})`);
  }
  return el("p", { class: "flag", "data-suspect": "false" }, `Quality score ${score}: not suspect`);
}

// α as a table: one row per target word, one column per source word, cells shaded by weight
// (CSS reads --alpha). Hard links are outlined.
function heatmap(translation, hypothesis, sentence, asked) {
  const [sourceName, targetName] = [languageName(asked.source), languageName(asked.target)];
  const source = translation.sourceWords;
  const target = hypothesis.targetWords;
  const linked = new Set(hypothesis.alignment.links.map((l) => `${l.target},${l.source}`));
  const table = el("table", { class: "heatmap", "data-sentence": String(sentence) },
    el("caption", { class: "visually-hidden" }, `Alignment α: each row is an ${targetName} word, each column a `,
       `${sourceName} word; `,
       "a darker cell is more attention, an outlined cell a hard link."));
  const head = el("tr", {}, el("td", { class: "corner" }));
  source.forEach((word, j) => {
    head.append(el("th", { scope: "col", class: "axis", lang: asked.source, "data-side": "source",
                           "data-index": String(j) },
                   el("span", {}, word)));
  });
  table.append(el("thead", {}, head));
  const body = el("tbody");
  hypothesis.alignment.rows.forEach((row, i) => {
    const tr = el("tr", {}, el("th", { scope: "row", class: "axis", lang: asked.target, "data-side": "target",
                                       "data-index": String(i) }, target[i] ?? ""));
    row.weights.forEach((weight, j) => {
      const label = `${target[i] ?? ""} ← ${source[j] ?? ""}: α ${fixed(weight)}`;
      const cell = el("td", { class: "cell", "data-target": String(i), "data-source": String(j),
                              title: label, "aria-label": label }, String(Math.round(weight * 100)));
      cell.style.setProperty("--alpha", weight.toFixed(3));     // CSSOM, allowed under style-src 'self'
      if (weight >= 0.65) cell.classList.add("dark");             // light text where the shade is dark
      if (linked.has(`${i},${j}`)) cell.classList.add("link");
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(body);
  return el("div", { class: "heatmap-wrap", tabindex: "0", role: "region",
                     "aria-label": `Alignment heatmap, sentence ${sentence + 1}` }, table);
}

function alternatives(hypotheses, asked) {
  const list = el("ol", { class: "alternatives", lang: asked.target });
  for (const h of hypotheses) {
    list.append(el("li", {}, el("span", { class: "alt-text" }, h.text), " ",
                   el("span", { class: "alt-score", lang: "en" },
                      `score ${fixed(h.score)}, quality ${fixed(h.quality.score)}${h.suspect ? ", suspect" : ""}`)));
  }
  return el("details", { class: "nbest", open: true }, el("summary", {}, `${hypotheses.length} alternatives (n-best)`), list);
}

// Hard links by side: links[side].get(index) = the indices it is linked to on the other side.
const sentenceLinks = [];

function renderSentence(translation, index, count, asked) {
  const best = translation.hypotheses[0];
  const links = { source: new Map(), target: new Map() };
  for (const { source, target } of best.alignment.links) {
    if (!links.source.has(source)) links.source.set(source, []);
    if (!links.target.has(target)) links.target.set(target, []);
    links.source.get(source).push(target);
    links.target.get(target).push(source);
  }
  sentenceLinks[index] = links;
  const section = el("section", { class: "sentence", "data-sentence": String(index),
                                  "aria-label": count > 1 ? `Sentence ${index + 1}` : "Word alignment" },
    count > 1 ? el("h3", {}, `Sentence ${index + 1}`) : null,
    el("div", { class: "pair" },
       el("span", { class: "side-label", "aria-hidden": "true" }, asked.source),
       words(translation.sourceWords, "source", index, asked.source),
       el("span", { class: "side-label", "aria-hidden": "true" }, asked.target),
       words(best.targetWords, "target", index, asked.target)),
    count > 1 ? qualityLine(best) : null,
    best.alignment.rows.length ? heatmap(translation, best, index, asked) : null,
    translation.hypotheses.length > 1 ? alternatives(translation.hypotheses, asked) : null);
  return section;
}

// `asked`: the pair the request was sent for (the direction may have changed since).
function render(reply, asked) {
  const entry = reply.translations[0];
  const sentences = sentencesOf(entry);
  $("result-heading").textContent = languageName(asked.target);
  $("target").lang = asked.target;
  $("target").textContent = entry.text;     // an HTML-mode translation is markup: shown as text
  const quality = $("quality");
  quality.replaceChildren();
  const suspects = sentences.map((t, i) => (t.hypotheses[0].suspect ? i + 1 : 0)).filter(Boolean);
  if (sentences.length === 1) {
    quality.append(...qualityLine(sentences[0].hypotheses[0]).childNodes);
  } else if (suspects.length) {
    quality.append(el("strong", {}, "suspect:"),
                   ` sentence${suspects.length > 1 ? "s" : ""} ${suspects.join(", ")} may be wrong`);
  } else if (sentences.length) {
    quality.append(`No sentence is suspect (${sentences.length} sentences).`);
  }
  quality.dataset.suspect = String(suspects.length > 0);
  sentenceLinks.length = 0;
  $("sentences").replaceChildren(...sentences.map((t, i) => renderSentence(t, i, sentences.length, asked)));
  $("result").hidden = false;
}

// --- highlighting the aligned words ------------------------------------------

const OTHER = { source: "target", target: "source" };

function clearHighlight() {
  for (const node of document.querySelectorAll("#sentences .highlight, #sentences .active, #sentences .cross")) {
    node.classList.remove("highlight", "active", "cross");
  }
}

function mark(sentence, side, index, name) {
  const scope = `#sentences [data-sentence="${sentence}"]`;
  for (const node of document.querySelectorAll(`${scope} .word[data-side="${side}"][data-index="${index}"], `
                                               + `${scope} .axis[data-side="${side}"][data-index="${index}"]`)) {
    node.classList.add(name);
  }
}

// A word: it is active, the words it is hard-linked to are highlighted, its heatmap row or column crossed.
// A heatmap cell: its two words are highlighted. Returns the partner words' text (for the live region).
function highlight(target) {
  clearHighlight();
  const sentence = Number(target.closest("[data-sentence]").dataset.sentence);
  if (target.classList.contains("cell")) {
    mark(sentence, "source", target.dataset.source, "highlight");
    mark(sentence, "target", target.dataset.target, "highlight");
    return null;
  }
  const side = target.dataset.side;
  const index = Number(target.dataset.index);
  const partners = sentenceLinks[sentence]?.[side].get(index) ?? [];
  mark(sentence, side, index, "active");
  for (const other of partners) mark(sentence, OTHER[side], other, "highlight");
  const attribute = side === "source" ? "data-source" : "data-target";
  for (const cell of document.querySelectorAll(`#sentences table[data-sentence="${sentence}"] td[${attribute}="${index}"]`)) {
    cell.classList.add("cross");
  }
  return partners.map((i) => document.querySelector(
    `#sentences .word[data-sentence="${sentence}"][data-side="${OTHER[side]}"][data-index="${i}"]`)?.textContent);
}

const hoverable = (node) => node instanceof Element && node.closest(".word, td.cell");

function wireHighlighting() {
  const container = $("sentences");
  container.addEventListener("mouseover", (e) => {
    const target = hoverable(e.target);
    if (target) highlight(target); else clearHighlight();
  });
  container.addEventListener("mouseleave", clearHighlight);
  container.addEventListener("focusin", (e) => {
    const target = hoverable(e.target);
    if (!target) return;
    const partners = highlight(target);
    if (partners) {
      $("link-status").textContent = partners.length
        ? `${target.textContent}: aligned to ${partners.join(", ")}` : `${target.textContent}: no hard link`;
    }
  });
  container.addEventListener("focusout", (e) => {
    if (!hoverable(e.relatedTarget)) clearHighlight();
  });
  // Left and right arrows move between the words of one line.
  container.addEventListener("keydown", (e) => {
    const word = e.target instanceof Element && e.target.closest(".word");
    if (!word || (e.key !== "ArrowLeft" && e.key !== "ArrowRight")) return;
    const next = e.key === "ArrowRight" ? word.nextElementSibling : word.previousElementSibling;
    if (next) {
      e.preventDefault();
      next.focus();
    }
  });
}

// --- the page ----------------------------------------------------------------

function showError(message, code = "") {
  const box = $("error");
  box.textContent = message;
  box.dataset.code = code;
}

async function translate() {
  const status = $("status");
  const button = $("translate");
  if (button.disabled) return;    // one request at a time (Ctrl+Enter submits past the disabled button)
  showError("");
  let request;
  try {
    request = buildRequest();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    showError(e.message, "CLIENT");
    return;
  }
  const asked = { ...pair };
  const started = performance.now();
  status.textContent = "Translating…";
  button.disabled = true;
  $("result").setAttribute("aria-busy", "true");
  try {
    render(await post("v1/translate", request), asked);
    status.textContent = `Translated in ${fixed((performance.now() - started) / 1000)} s.`;
  } catch (e) {
    status.textContent = "";
    if (!(e instanceof ServerError)) throw e;
    showError(e.message, e.code);
  } finally {
    button.disabled = false;
    $("result").removeAttribute("aria-busy");
  }
}

// --- files -------------------------------------------------------------------

const PREVIEW_CHARS = 20000;        // of the translated file, shown below its download link

// A file through POST /v1/translate_file, for the chosen pair (or model): the answer is the
// translated file itself, offered for download and, in a text format, shown as text.
async function translateFile(file) {
  const status = $("status");
  const link = $("file-download");
  const preview = $("file-preview");
  showError("");
  link.hidden = true;
  preview.hidden = true;
  const form = new FormData();
  form.append("file", file, file.name);
  if (!$("direction-option").hidden) {
    form.append("source_language", pair.source);
    form.append("target_language", pair.target);
  }
  if (!$("model-option").hidden && $("model").value) form.append("model", $("model").value);
  status.textContent = `Translating ${file.name}…`;
  const started = performance.now();
  let response;
  try {
    response = await fetch("v1/translate_file", { method: "POST", body: form });
  } catch (e) {
    status.textContent = "";
    showError(`The server could not be reached (${e.message}).`, "UNAVAILABLE");
    return;
  }
  if (!response.ok) {
    const error = (await response.json().catch(() => null))?.error ?? {};
    status.textContent = "";
    showError(error.message || `The server answered ${response.status} ${response.statusText}.`,
              error.code || String(response.status));
    return;
  }
  const blob = await response.blob();
  const disposition = response.headers.get("Content-Disposition") ?? "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? file.name;
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(blob);
  link.download = name;
  link.textContent = `Download ${name}`;
  link.hidden = false;
  if (!blob.type.startsWith("application/vnd.")) {     // a .docx or .odt is a zip: nothing to show
    const text = await blob.text();
    preview.textContent = text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}\n…` : text;
    preview.hidden = false;
  }
  const left = Number(response.headers.get("X-Untranslated-Entries") ?? 0);
  status.textContent = `Translated ${file.name} in ${fixed((performance.now() - started) / 1000)} s`
    + (left ? `; ${left} entries left untranslated (a placeholder would have been lost).` : ".");
}

function wireFiles() {
  $("file").addEventListener("change", (e) => {
    if (e.target.files.length) translateFile(e.target.files[0]);
  });
  const source = $("source");
  source.addEventListener("dragover", (e) => {
    if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
  });
  source.addEventListener("drop", (e) => {
    if (!e.dataTransfer?.files.length) return;     // dropped text goes into the box as usual
    e.preventDefault();
    translateFile(e.dataTransfer.files[0]);
  });
}

async function loadModels() {
  let reply;
  try {
    const response = await fetch("v1/models");
    if (!response.ok) return;
    reply = await response.json();
  } catch {
    return;     // the page still works with the server's default model
  }
  const models = reply.models ?? [];
  servedModels = models;
  servedPairs = [];
  for (const m of [...models.filter((m) => m.isDefault), ...models.filter((m) => !m.isDefault)]) {
    if (!servedPairs.some((p) => p.source === m.sourceLanguage && p.target === m.targetLanguage)) {
      servedPairs.push({ source: m.sourceLanguage, target: m.targetLanguage });
    }
  }
  if (servedPairs.length > 1) {
    $("direction").replaceChildren(...servedPairs.map((p) => el("option", { value: `${p.source}:${p.target}` },
      `${languageName(p.source)} → ${languageName(p.target)}`)));
    $("direction-option").hidden = false;
    chooseDirection(servedPairs[0]);
  } else {
    showModels(models);         // one pair: the page stays as it is, Spanish to English
  }
  const shown = models.find((m) => m.isDefault) ?? models[0];
  if (shown) {
    $("model-info").textContent = `Model ${shown.name}, version ${shown.version} (${shown.architecture})`
      + (models.length > 1 ? `, and ${models.length - 1} more` : "");
  }
}

// The model select: these models, the default selected; shown when there is a choice.
function showModels(models) {
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.name, selected: m.isDefault },
                                                     `${m.name} (${m.sourceLanguage} → ${m.targetLanguage})`)));
  $("model-option").hidden = models.length < 2;
}

const isServed = (source, target) => servedPairs.some((p) => p.source === source && p.target === target);

// Translate `next` ({source, target}) from now on: the labels, the languages marked for screen
// readers, the swap button and the models to choose from follow.
function chooseDirection(next) {
  Object.assign(pair, next);
  $("direction").value = `${pair.source}:${pair.target}`;
  $("source-label").textContent = languageName(pair.source);
  const source = $("source");
  source.lang = pair.source;
  source.placeholder = pair.source === "es" ? PLACEHOLDER : "";
  // a glossary term is written source = target, in the pair's order
  $("glossary-form").textContent = `${languageName(pair.source).toLowerCase()} = ${languageName(pair.target).toLowerCase()}`;
  $("glossary").placeholder = pair.source === "es" && pair.target === "en" ? "tren = train" : "";
  $("swap").disabled = !isServed(pair.target, pair.source);
  showModels(servedModels.filter((m) => m.sourceLanguage === pair.source && m.targetLanguage === pair.target));
}

// The other way round; a translation on the page becomes the text to translate back.
function swapDirection() {
  if (!isServed(pair.target, pair.source)) return;
  const translation = $("result").hidden ? "" : $("target").textContent;
  chooseDirection({ source: pair.target, target: pair.source });
  if (translation) $("source").value = translation;
}

function main() {
  const form = $("form");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    translate();
  });
  form.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  $("direction").addEventListener("change", (e) => {
    const [source, target] = e.target.value.split(":");
    chooseDirection({ source, target });
  });
  $("swap").addEventListener("click", swapDirection);
  wireHighlighting();
  wireFiles();
  loadModels();
}

main();
