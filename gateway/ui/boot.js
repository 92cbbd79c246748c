// The page's one classic script, run before its module: when a part of the page (the module
// or any module it imports) fails to load, as Chromium fails requests in flight when the
// device's network changes, the page says so and loads itself again, after 1 s and then up to
// 30 s apart, instead of staying on its first "Connecting…" with nothing running. A page that
// loaded whole forgets the failures.
(() => {
  const key = 'vigil.bootFailures';
  window.addEventListener('error', (ev) => {
    const el = ev.target;
    if (!(el instanceof HTMLScriptElement) || el.type !== 'module' || window.vigilBootFailed) return;
    window.vigilBootFailed = true;
    const failures = Number(sessionStorage.getItem(key) || 0) + 1;
    sessionStorage.setItem(key, String(failures));
    const wait = Math.min(30, 2 ** (failures - 1));
    const show = () => {
      const p = document.createElement('p');
      p.className = 'notice';
      p.setAttribute('role', 'alert');
      p.id = 'boot-failed';
      p.textContent = `Part of this page did not load (the network changed or the server did not answer). Loading it again in ${wait} s…`;
      (document.getElementById('main') || document.body).prepend(p);
    };
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', show);
    else show();
    setTimeout(() => location.reload(), wait * 1000);
  }, true);
  window.addEventListener('load', () => {
    if (!window.vigilBootFailed) sessionStorage.removeItem(key);
  });
})();
