// Stylesheets imported for their side effect: esbuild bundles them into the one CSS file.
declare module '*.css';
