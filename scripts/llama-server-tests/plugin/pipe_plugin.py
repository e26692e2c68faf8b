"""pytest plugin loaded by scripts/llama-server-tests.sh (-p pipe_plugin).

llama.cpp's conftest.py starts every ServerPreset once per session only to download its
model (ServerPreset.load_all). Nothing is downloaded here: pipe_server.py serves a
generated model, and presets pipe cannot start (embeddings, reranking, vision) would
fail the whole session there instead of in the tests that use them. So load_all is
made a no-op; each test still starts its own server as it does under llama-server.
"""
import utils

utils.ServerPreset.load_all = staticmethod(lambda: None)
