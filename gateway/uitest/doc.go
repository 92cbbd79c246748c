// Package uitest drives Vigil's web UI in headless Chromium against the real stack started
// in-process: the chat, lobby and room services' Run functions and gateway.New, on real Redis
// (pkg/redistest). It has no code of its own besides its tests; it is a separate module so the
// gateway does not depend on chromedp.
//
// The tests need Debian's chromium and ffmpeg (apt-get install -y chromium ffmpeg): ffmpeg
// makes the small test video, chromium plays it. Set VIGIL_SCREENSHOTS to a directory (for
// example ../../docs/screenshots) to save a screenshot of each page there.
package uitest
