// The API docs at /docs: Swagger UI (swagger-ui/, vendored) rendering the OpenAPI document
// (service/http/openapi.py). A file rather than an inline script, so that the page runs under
// Content-Security-Policy script-src 'self'.
window.ui = SwaggerUIBundle({
  url: "openapi.json",        // relative, so the page also works behind a path prefix
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",       // without the top bar, which needs the standalone preset
  deepLinking: true,
  validatorUrl: null,         // never ask validator.swagger.io: the page needs no network
  defaultModelsExpandDepth: 0,
});
