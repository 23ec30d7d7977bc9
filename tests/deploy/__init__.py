"""The image, its build context, and the Kubernetes manifests, checked by real tools."""
