"""HTTP beside gRPC: the native JSON API, LibreTranslate's API and the web page (docs/http.md)."""
