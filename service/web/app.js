// clustersim's web page: plain JavaScript modules on the service's own API (no build step, no library). This file
// wires the page up; each tab's code is a module of its own beside it:
//   dom.mjs       helpers: elements, figures with units, status lines and progress bars
//   api.mjs       the API (the token, errors, pictures asked for again while drawn, jobs followed to their end)
//   pictures.mjs  a picture's slot: "drawing…" until it is shown, or why it is not
//   result.mjs    a simulation result, an error, a job that did not succeed
//   examples.mjs  the example requests
//   simulate.mjs, compare.mjs, search.mjs, jobs.mjs, interop.mjs   the tabs and the import/export panel
//   tabs.mjs      switching tabs
// The modules touch no page element when imported, so Node imports them in the tests (tests/service/web/).
import {$, pretty} from "./dom.mjs";
import {keepToken, token} from "./api.mjs";
import {EXAMPLES, SEARCH_EXAMPLE, exampleSelect} from "./examples.mjs";
import {addCompareEditor, runCompare} from "./compare.mjs";
import {refreshJobs} from "./jobs.mjs";
import {runExport, runImport, syncImportKind} from "./interop.mjs";
import {runSearch} from "./search.mjs";
import {loadPresets, runInline, runJob, writeFromBuilder} from "./simulate.mjs";
import {onTab, switchTab} from "./tabs.mjs";

const JOBS_REFRESH_MS = 2000;

function start() {
  const select = $("#example");
  select.replaceChildren(...exampleSelect().children);
  select.value = "0";
  select.addEventListener("change", () => { $("#request").value = pretty(EXAMPLES[Number(select.value)].request); });
  $("#request").value = pretty(EXAMPLES[0].request);
  $("#search-request").value = pretty(SEARCH_EXAMPLE);
  const tokenInput = $("#token");
  tokenInput.value = token();
  tokenInput.addEventListener("change", () => {
    keepToken(tokenInput.value);
    loadPresets();
  });
  let jobsTimer = null;
  onTab("jobs", () => {
    refreshJobs();
    jobsTimer = setInterval(refreshJobs, JOBS_REFRESH_MS);
  }, () => clearInterval(jobsTimer));
  document.querySelectorAll(".tab-button").forEach((b) => b.addEventListener("click", () => switchTab(b.dataset.tab)));
  $("#run-inline").addEventListener("click", runInline);
  $("#run-job").addEventListener("click", runJob);
  $("#b-write").addEventListener("click", writeFromBuilder);
  $("#imp-kind").addEventListener("change", syncImportKind);
  $("#imp-run").addEventListener("click", runImport);
  $("#exp-download").addEventListener("click", runExport);
  syncImportKind();
  $("#compare-add").addEventListener("click", () => addCompareEditor(1));
  $("#compare-run").addEventListener("click", runCompare);
  $("#search-run").addEventListener("click", runSearch);
  $("#jobs-refresh").addEventListener("click", refreshJobs);
  addCompareEditor(3);
  addCompareEditor(4);
  loadPresets();
  fetch("/openapi.json").then((r) => r.json()).then((spec) => {
    $("#server-info").textContent = `clustersim ${spec.info.version} · ${location.host}`;
  }).catch(() => undefined);
  document.body.dataset.ready = "true";
}

// A module runs after the document is parsed (as a deferred script), so the page is there already.
start();
