// The service's API as the page calls it. Every call goes through send(): the token, when one is typed, is kept
// for this browser session (sessionStorage) and sent as "Authorization: Bearer <token>".
import {sleep} from "./dom.mjs";

const TOKEN_KEY = "clustersim.token";
const PICTURE_WAIT_MS = 15 * 60 * 1000; // past the service's own limit on a drawing (300 s) with room to spare

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    const details = (error.details || []).map((d) => `${d.field}: ${d.rule}`);
    super(`${status} ${error.code || ""}: ${error.message || "request failed"}` +
          (details.length ? ` (${details.join("; ")})` : ""));
    this.status = status;
    this.body = body;
  }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function keepToken(value) { sessionStorage.setItem(TOKEN_KEY, value.trim()); }

// A request's text as a body: JSON when it parses as JSON, YAML otherwise (the API reads both).
export function bodyOf(text) {
  try {
    JSON.parse(text);
    return {body: text, type: "application/json"};
  } catch (_) {
    return {body: text, type: "application/yaml"};
  }
}

function send(method, path, text) {
  const t = token();
  const headers = t ? {Authorization: `Bearer ${t}`} : {};
  const init = {method, headers};
  if (text !== undefined) {
    const {body, type} = bodyOf(text);
    headers["Content-Type"] = type;
    init.body = body;
  }
  return fetch(path, init);
}

async function failure(response) {
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON */ }
  return new ApiError(response.status, body);
}

// A JSON answer; ApiError for any status but 2xx.
export async function api(method, path, text) {
  const response = await send(method, path, text);
  if (!response.ok) throw await failure(response);
  return response.json();
}

// Seconds to wait before asking again for a picture being drawn: its Retry-After (whole seconds, as the service
// sends it), 1 when it has none, at most 60.
export function retryAfterS(header) {
  const value = Number(header);
  return header !== null && header !== "" && Number.isFinite(value) && value > 0 ? Math.min(60, value) : 1;
}

// A picture as a blob. A job's picture not drawn yet answers 202 (it is being drawn): `onWait(seconds)` hears of
// each such answer, and the picture is asked for again after its Retry-After.
export async function pictureBlob(method, path, text, onWait = () => undefined) {
  const started = Date.now();
  let response = await send(method, path, text);
  while (response.status === 202) {
    const wait = retryAfterS(response.headers.get("Retry-After"));
    if (Date.now() - started + 1000 * wait > PICTURE_WAIT_MS) {
      throw new Error(`still being drawn after ${Math.round((Date.now() - started) / 60000)} min: open it again later`);
    }
    onWait(wait);
    await sleep(1000 * wait);
    response = await send(method, path, text);
  }
  if (!response.ok) throw await failure(response);
  return response.blob();
}

// Poll a job until it ends; `onUpdate(job)` sees every status read. Resolves with the last status.
export async function followJob(id, onUpdate) {
  for (;;) {
    const job = await api("GET", `/v1/jobs/${id}`);
    onUpdate(job);
    if (!["queued", "running"].includes(job.status)) return job;
    await sleep(200);
  }
}

// An error as the lines a user acts on: each "field: rule" the API named, else the message.
export function errorText(err) {
  const details = (err && err.body && err.body.error && err.body.error.details) || [];
  return details.length ? details.map((d) => `${d.field}: ${d.rule}`).join("\n") : String((err && err.message) || err);
}

// Why a job did not succeed, from its `error` ({code, message, details}): the message, then each "field: rule";
// "" for a job with no error.
export function jobReason(job) {
  const error = job && job.error;
  if (!error) return "";
  const details = (error.details || []).map((d) => `${d.field}: ${d.rule}`);
  return [error.message || error.code].concat(details).join("\n");
}
