// The service worker of pipe serve's chat page: with the manifest it makes
// the page installable as an app, and it keeps the page's own files for
// when the server does not answer, in a cache named by the server's
// version (/_app/version.json) so that a new build's page replaces the old
// one. Network first: a server that answers always serves its current page.
// API requests are never touched.
"use strict";

const files = ["/", "/page/app.js", "/page/app.css", "/manifest.webmanifest"];

async function cacheName() {
  const r = await fetch("/_app/version.json", { cache: "no-store" });
  return "pipe-" + (await r.json()).version;
}

self.addEventListener("install", (e) => {
  e.waitUntil(cacheName().then((n) => caches.open(n)).then((c) => c.addAll(files)));
});

self.addEventListener("activate", (e) => {
  e.waitUntil(cacheName().then((n) => caches.keys().then((ks) =>
    Promise.all(ks.filter((k) => k !== n).map((k) => caches.delete(k))))));
});

self.addEventListener("fetch", (e) => {
  const u = new URL(e.request.url);
  if (e.request.method !== "GET" || u.origin !== location.origin || !files.includes(u.pathname)) return;
  e.respondWith(fetch(e.request).catch(() => caches.match(e.request)));
});
