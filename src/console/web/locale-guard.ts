// Imported before anything else: uPlot formats numbers with `new Intl.NumberFormat(navigator.language)`
// when its module loads, and some browsers report a tag Intl refuses (headless Chromium under a
// POSIX locale says "en-US@posix"), which would stop the whole script. Such a browser is given
// the plain tag instead.
try {
  new Intl.NumberFormat(navigator.language);
} catch {
  const plain = navigator.language.replace(/@.*$/, '');
  let usable = 'en-US';
  try {
    new Intl.NumberFormat(plain);
    usable = plain;
  } catch {
    // keep en-US
  }
  Object.defineProperty(navigator, 'language', { configurable: true, get: () => usable });
}

export {};
