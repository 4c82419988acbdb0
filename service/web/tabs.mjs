// The page's tabs: one shown at a time; a tab may have something to start when it is shown and to stop when it
// is left (the Jobs tab's refresh).
const hooks = {};

// Run `enter()` each time the tab `name` is shown and `leave()` each time it is left.
export function onTab(name, enter, leave) {
  hooks[name] = {enter, leave};
}

let shown = null;

export function switchTab(name) {
  document.querySelectorAll(".tab-button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.id === `tab-${name}`));
  if (shown !== name && hooks[shown]) hooks[shown].leave();
  if (shown !== name && hooks[name]) hooks[name].enter();
  shown = name;
}
