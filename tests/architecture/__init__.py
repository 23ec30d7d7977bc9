"""The layout's rules: generated code is generated, the worlds import only what they may."""
