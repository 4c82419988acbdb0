// The pictures of a result: a slot shows "drawing…" with a spinner while the service draws the picture (it may
// answer 202 with a Retry-After while it does: the slot says when it expects it) and while the browser decodes
// it, then the picture; or, when it cannot be had or shown, why. Never a broken image.
import {el} from "./dom.mjs";

export const KINDS = ["timeline", "breakdown", "memory"];
export const KIND_TITLES = {timeline: "Pipeline timeline", breakdown: "Where the time goes", memory: "Memory per stage"};
const FORMATS = {"image/svg+xml": "svg", "image/png": "png"};

// What a slot says while its picture is on its way; after a 202, when the service expects it (`waitS`).
export function drawingText(waitS) {
  return waitS ? `drawing… the service expects it in about ${waitS} s` : "drawing…";
}

export function pictureSlot(kind, title) {
  const caption = title || KIND_TITLES[kind];
  const img = el("img", {alt: caption, "data-kind": kind, hidden: ""});
  const note = el("span", {class: "picture-note", text: drawingText()});
  const state = el("div", {class: "picture-state", role: "status"}, el("span", {class: "spinner", "aria-hidden": "true"}),
    note);
  const download = el("a", {class: "download", text: "SVG", hidden: ""});
  const figure = el("figure", {class: `picture picture-${kind}`, "data-kind": kind, "data-state": "drawing"},
    el("figcaption", {}, el("span", {text: caption}), download),
    el("div", {class: "frame loading"}, state, img));
  return {figure, img, note, state, download};
}

// Show `url` in `img`: resolves once it is decoded, rejects when the browser cannot read it as an image.
function shown(img, url) {
  return new Promise((resolve, reject) => {
    img.onload = resolve;
    img.onerror = () => reject(new Error("the service sent a picture the browser cannot read"));
    img.src = url;
  }).then(() => img.decode().catch(() => undefined));
}

// Fill a slot: `load(onWait)` resolves with the picture as a blob, calling onWait(seconds) on each 202.
export async function fillPicture(slot, load) {
  const {figure, img, note, state, download} = slot;
  const frame = img.parentElement;
  let retries = 0;
  try {
    const blob = await load((waitS) => {
      retries += 1;
      figure.dataset.retries = String(retries);
      note.textContent = drawingText(waitS);
    });
    figure.dataset.state = "showing";
    note.textContent = "showing…";
    const url = URL.createObjectURL(blob);
    await shown(img, url);
    const format = FORMATS[blob.type] || "svg";
    download.href = url;
    download.download = `clustersim-${img.dataset.kind}.${format}`;
    download.textContent = format.toUpperCase();
    download.hidden = false;
    state.remove();
    img.hidden = false;
    figure.dataset.state = "loaded";
    figure.dataset.loaded = "true";
  } catch (err) {
    img.removeAttribute("src");
    const what = err.status ? "Not drawn" : "Not shown";  // the service's answer, or the browser's
    state.replaceChildren(el("div", {class: "error picture-error", text: `${what}: ${err.message || err}`}));
    figure.dataset.state = "error";
    figure.dataset.loaded = "error";
  } finally {
    frame.classList.remove("loading");
  }
}
