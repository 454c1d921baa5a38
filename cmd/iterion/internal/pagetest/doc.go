// Package pagetest holds the browser test of every HTML page and the demo
// report: it opens each in headless Chromium (Debian's chromium package,
// driven by chromedp) at 400 px and 1,400 px and asserts that nothing
// overflows sideways and that the key text is there. It lives apart so it
// can import the server, the simulator and the demo without a cycle; it
// has no code of its own.
package pagetest
