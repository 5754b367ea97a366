#!/usr/bin/env python3
"""`ssd serve` driven by the official `openai` Python client (optional check, run by ctest):
   openai_client_test.py SSD_BIN
Starts the server on the default model (SSD_MODEL) on loopback with an ephemeral port and an API
key, then: models.list, a chat completion, a streamed chat completion (the deltas join to the
whole response's text), a completion, a wrong key (AuthenticationError) and a bad max_tokens
(BadRequestError). Skips (exit 77, saying why) without the `openai` package or without SSD_MODEL.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import openai
except ImportError:
    print("SKIP: the `openai` Python package is not installed (pip install openai)")
    sys.exit(77)
model = os.environ.get("SSD_MODEL", "")
if not os.path.isfile(model):
    print("SKIP: set SSD_MODEL to the default model (launch/fetch-model.sh) to run this check")
    sys.exit(77)

tmp = tempfile.mkdtemp()
port_file = os.path.join(tmp, "port")
err = open(os.path.join(tmp, "stderr"), "w+")
server = subprocess.Popen([sys.argv[1], "serve", "-m", model, "--threads", "1", "--port", "0",
                           "--port-file", port_file, "--api-key", "k3y",
                           "--served-model-name", "smol"], stdout=subprocess.DEVNULL, stderr=err)
try:
    deadline = time.time() + 120
    while not os.path.exists(port_file) or not open(port_file).read().endswith("\n"):
        assert server.poll() is None, "ssd serve exited at start-up"
        assert time.time() < deadline, "ssd serve did not listen within 120 s"
        time.sleep(0.1)
    base = f"http://127.0.0.1:{int(open(port_file).read())}/v1"
    client = openai.OpenAI(base_url=base, api_key="k3y", timeout=120, max_retries=0)

    assert [m.id for m in client.models.list().data] == ["smol"]
    messages = [{"role": "user", "content": "Name a primary color."}]
    whole = client.chat.completions.create(model="smol", messages=messages, max_tokens=16,
                                           temperature=0)
    text = whole.choices[0].message.content
    assert whole.usage.completion_tokens <= 16 and whole.usage.prompt_tokens > 0
    assert whole.choices[0].finish_reason in ("stop", "length")
    streamed = client.chat.completions.create(model="smol", messages=messages, max_tokens=16,
                                              temperature=0, stream=True)
    parts = [c.choices[0].delta.content or "" for c in streamed if c.choices]
    assert "".join(parts) == text, ("".join(parts), text)
    comp = client.completions.create(model="smol", prompt="The capital of France is",
                                     max_tokens=8, temperature=0)
    assert comp.choices[0].text and comp.usage.completion_tokens <= 8
    try:
        openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError:
        pass
    try:
        client.completions.create(model="smol", prompt="x", max_tokens=0)
        raise AssertionError("max_tokens 0 was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400
    print(f"openai {openai.__version__}: models, chat, streamed chat, completion, 401, 400: ok "
          f"({text!r})")
finally:
    server.send_signal(signal.SIGTERM)
    rc = server.wait(timeout=120)
    if rc != 0:
        err.seek(0)
        print(err.read())
        sys.exit(1)
