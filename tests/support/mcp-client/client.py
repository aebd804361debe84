"""A scripted MCP client for gatehost's whole-program tests, on the official
MCP Python SDK (the `mcp` package, pinned in requirements.txt).

    python client.py SERVER.json

SERVER.json is {"command": PATH, "args": [...], "env": {NAME: VALUE},
"cwd": DIR or null}: the server it spawns over stdio (stdio_client), in
that directory, with that environment on top of the SDK's default one. It initializes the session, prints one JSON line
{"ready": true, "protocolVersion", "serverInfo"}, then reads steps from
stdin, one JSON object a line, and answers each with one JSON line:

    {"op": "list_tools"}
        -> {"tools": [{"name", "description", "inputSchema", "annotations"}]}
    {"op": "call", "tool": NAME, "arguments": {...}}
        -> {"isError", "structuredContent", "text": [...]}

A step that raises answers {"exception": TYPE, "message"}. At the end of
stdin the session is closed (the server's stdin with it) and it exits 0.
A session that cannot start prints {"error": ...} and exits 1.
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def step(session, request):
    op = request.get("op")
    if op == "list_tools":
        result = await session.list_tools()
        return {"tools": [dump(t) for t in result.tools]}
    if op == "call":
        result = await session.call_tool(request["tool"], request.get("arguments") or {})
        return {
            "isError": bool(result.is_error),
            "structuredContent": result.structured_content,
            "text": [c.text for c in result.content if getattr(c, "type", None) == "text"],
        }
    return {"exception": "ValueError", "message": f"unknown op {op!r}"}


async def main(config_path):
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    server = StdioServerParameters(
        command=config["command"],
        args=config.get("args", []),
        env=config.get("env") or {},
        cwd=config.get("cwd"),
    )
    stdin = anyio.wrap_file(sys.stdin)
    try:
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                emit(
                    {
                        "ready": True,
                        "protocolVersion": init.protocol_version,
                        "serverInfo": dump(init.server_info),
                    }
                )
                async for line in stdin:
                    if not line.strip():
                        continue
                    try:
                        emit(await step(session, json.loads(line)))
                    except Exception as e:  # a step's failure is its answer
                        emit({"exception": type(e).__name__, "message": str(e)})
    except Exception as e:
        emit({"error": f"{type(e).__name__}: {e}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1]))
