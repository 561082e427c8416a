"""The atlas: what every vLLM release prints and accepts, read from its wheel and stored compactly.

wheels fetches a release's sources, extract reads facts out of one source file (pure, AST-based),
store keeps each fact once with the set of releases holding it, drift compares a release with the
ones before it, and check lints entries against the store.
"""
