// gatehost's OpenCode plugin: gates every end of turn (`session.idle`).
//
// Installed by `gatehost hook install opencode` into OpenCode's plugin
// directory (user scope: $XDG_CONFIG_HOME/opencode/plugin/gatehost.js, by
// default ~/.config/opencode/plugin/; project scope: .opencode/plugin/). When
// a session goes idle it runs the command below with one JSON object on
// stdin and reads one JSON object from stdout:
//
//   stdin:  {"hook_event_name": "session.idle", "session_id", "cwd",
//            "worktree", "parent_session_id", "last_assistant_message",
//            "stop_hook_active", "can_continue", "opencode_mode",
//            "opencode_version"}
//   stdout: {"decision": "block", "reason": "..."}  send the agent back: the
//                                                   reason is its next prompt
//           {"systemMessage": "..."}                let it stop, show this
//           {}                                      let it stop
//
// The command is the one the user installed, written below by the installer
// as an absolute path with its arguments: nothing in the workspace (which
// the agent writes) and no environment variable chooses it. Until the
// installer has replaced the placeholder, every stop is refused with an
// error.
//
// OpenCode 1.18.33, measured (see docs/compatibility.md, OpenCode):
// - `opencode serve`, the TUI, and `opencode run --attach` keep the session
//   alive after `session.idle`: a block is sent as the session's next user
//   message (session.promptAsync) and the agent goes on.
// - plain `opencode run` exits as soon as the session is idle and does not
//   wait for plugins: the agent cannot be sent back. There the gate runs
//   synchronously (so the process cannot exit under it), with
//   "can_continue": false; a block is printed on stderr as "gatehost: ..."
//   and the exit status is set to 1: the work was not accepted.
//
// gatehost's answer is final: this file keeps no retry count of its own
// (gatehost counts retries). Its own failures (gatehost missing, crashed,
// timed out, answered no JSON) fail closed: the first sends the agent back
// with the error, a second in a row lets the stop through with the error
// shown, so a missing gatehost cannot loop a session forever.

import { spawn as nodeSpawn, spawnSync as nodeSpawnSync } from "node:child_process"

// -- written by `gatehost hook install opencode`; do not edit by hand -------
// gatehost-config-begin
const GATEHOST = {"command": null, "args": [], "timeoutMs": 600000}
// gatehost-config-end
// ---------------------------------------------------------------------------

// Taken once, at load: a project plugin loaded later cannot swap them.
const spawn = nodeSpawn
const spawnSync = nodeSpawnSync
const MAX_OUTPUT = 1 << 20 // bytes of stdout/stderr kept from gatehost

function opencodeMode() {
  // `opencode run ...` runs the server in process: argv is
  // [bun, /$bunfs/root/src/index.js, "run", ...]. The TUI runs it in a
  // worker, `opencode serve` as "serve".
  const args = (process.argv || []).slice(2).filter((a) => !a.startsWith("-"))
  if (args[0] === "run") return process.argv.includes("--attach") ? "run-attach" : "run"
  if (args[0] === "serve" || args[0] === "web" || args[0] === "acp") return args[0]
  return "tui"
}

function parseAnswer(stdout) {
  const text = stdout.trim()
  if (text === "") throw new Error("gatehost answered nothing on stdout")
  let answer
  try {
    answer = JSON.parse(text)
  } catch (e) {
    throw new Error(`gatehost answered no JSON: ${text.slice(0, 200)}`)
  }
  if (answer === null || typeof answer !== "object" || Array.isArray(answer))
    throw new Error(`gatehost answered ${text.slice(0, 200)}, not a JSON object`)
  if (answer.decision === "block") {
    if (typeof answer.reason !== "string" || answer.reason.trim() === "")
      throw new Error("gatehost blocked with no reason")
  } else if (answer.decision !== undefined) {
    throw new Error(`gatehost answered an unknown decision: ${JSON.stringify(answer.decision)}`)
  }
  return answer
}

function describeExit(status, signal, stderr) {
  const tail = stderr.trim().split("\n").slice(-5).join("\n")
  const how = signal ? `was killed by ${signal}` : `exited with status ${status}`
  return `gatehost ${how}${tail ? `: ${tail}` : ""}`
}

// Runs gatehost asynchronously (serve, TUI): the server keeps serving meanwhile.
function runGatehost(payload, cwd) {
  return new Promise((resolve, reject) => {
    let child
    try {
      child = spawn(GATEHOST.command, GATEHOST.args, { cwd, stdio: ["pipe", "pipe", "pipe"] })
    } catch (e) {
      reject(new Error(`could not start ${GATEHOST.command}: ${e.message}`))
      return
    }
    let stdout = "", stderr = "", done = false
    const timer = setTimeout(() => {
      if (done) return
      child.kill("SIGKILL")
      finish(new Error(`gatehost did not answer within ${GATEHOST.timeoutMs} ms`))
    }, GATEHOST.timeoutMs)
    function finish(err, value) {
      if (done) return
      done = true
      clearTimeout(timer)
      err ? reject(err) : resolve(value)
    }
    child.on("error", (e) => finish(new Error(`could not start ${GATEHOST.command}: ${e.message}`)))
    child.stdout.on("data", (d) => { if (stdout.length < MAX_OUTPUT) stdout += d })
    child.stderr.on("data", (d) => { if (stderr.length < MAX_OUTPUT) stderr += d })
    child.on("close", (status, signal) => {
      if (stderr.trim()) console.error(stderr.trimEnd())
      if (status !== 0) return finish(new Error(describeExit(status, signal, stderr)))
      try { finish(null, parseAnswer(stdout)) } catch (e) { finish(e) }
    })
    child.stdin.on("error", () => {}) // gatehost may exit without reading
    child.stdin.end(JSON.stringify(payload))
  })
}

// Runs gatehost synchronously (plain `opencode run`): the process cannot exit under it.
function runGatehostSync(payload, cwd) {
  const r = spawnSync(GATEHOST.command, GATEHOST.args, {
    cwd, input: JSON.stringify(payload), encoding: "utf8",
    timeout: GATEHOST.timeoutMs, killSignal: "SIGKILL", maxBuffer: MAX_OUTPUT,
  })
  if (r.error) {
    if (r.error.code === "ETIMEDOUT") throw new Error(`gatehost did not answer within ${GATEHOST.timeoutMs} ms`)
    throw new Error(`could not start ${GATEHOST.command}: ${r.error.message}`)
  }
  const stderr = r.stderr || ""
  if (stderr.trim()) process.stderr.write(stderr.endsWith("\n") ? stderr : stderr + "\n")
  if (r.status !== 0) throw new Error(describeExit(r.status, r.signal, stderr))
  return parseAnswer(r.stdout || "")
}

export const GatehostPlugin = async ({ client, directory, worktree }) => {
  const mode = opencodeMode()
  const canContinue = mode !== "run"
  const inFlight = new Set() // sessions whose stop is being gated
  const lastReason = new Map() // session -> the last reason this plugin sent
  const failures = new Map() // session -> gatehost failures in a row
  // What the events told of each session, kept as they arrive: the payload
  // is built without a call back into OpenCode, so that under plain
  // `opencode run` nothing awaits before the gate runs (the process exits at
  // the first await after `session.idle`).
  const sessions = new Map() // session -> {info, assistantID, userID, texts: Map(messageID -> Map(partID -> text))}

  function track(event) {
    const p = event.properties || {}
    const sid = p.sessionID || (p.info && p.info.sessionID) || (p.part && p.part.sessionID)
    if (typeof sid !== "string") return
    let s = sessions.get(sid)
    if (!s) sessions.set(sid, (s = { info: null, assistantID: null, userID: null, texts: new Map() }))
    if ((event.type === "session.created" || event.type === "session.updated") && p.info) s.info = p.info
    // Message ids sort in creation order; an older message's update (its
    // summary, after the turn) must not take the place of the newest.
    if (event.type === "message.updated" && p.info && typeof p.info.id === "string") {
      const newer = (cur) => cur === null || p.info.id > cur
      if (p.info.role === "assistant" && newer(s.assistantID)) s.assistantID = p.info.id
      if (p.info.role === "user" && newer(s.userID)) s.userID = p.info.id
      // keep memory small: older messages' texts are never asked for
      for (const id of s.texts.keys()) if (id < s.assistantID && id < s.userID) s.texts.delete(id)
    }
    if (event.type === "message.part.updated" && p.part && p.part.type === "text" && !p.part.synthetic) {
      let parts = s.texts.get(p.part.messageID)
      if (!parts) s.texts.set(p.part.messageID, (parts = new Map()))
      parts.set(p.part.id, typeof p.part.text === "string" ? p.part.text : "")
    }
    if (event.type === "session.deleted") sessions.delete(sid)
  }

  function textOfMessage(s, id) {
    const parts = id && s.texts.get(id)
    return parts ? [...parts.values()].join("\n").trim() : ""
  }

  function payloadFor(sessionID) {
    const s = sessions.get(sessionID) || { info: null, assistantID: null, userID: null, texts: new Map() }
    const sent = lastReason.get(sessionID)
    return {
      hook_event_name: "session.idle",
      session_id: sessionID,
      cwd: (s.info && s.info.directory) || directory,
      worktree,
      parent_session_id: (s.info && s.info.parentID) || null,
      last_assistant_message: textOfMessage(s, s.assistantID),
      // true when the turn that just ended answered this plugin's own block
      // (informative only: gatehost counts retries itself)
      stop_hook_active: sent !== undefined && textOfMessage(s, s.userID) === sent.trim(),
      can_continue: canContinue,
      opencode_mode: mode,
      opencode_version: (s.info && s.info.version) || null,
    }
  }

  // What the user sees: stderr in `opencode run` (written at once), the
  // server's stderr, its log and a TUI toast elsewhere.
  function tell(sessionID, message, variant) {
    const line = message.startsWith("gatehost") ? message : `gatehost: ${message}`
    if (!canContinue) {
      process.stderr.write(line + "\n")
      return Promise.resolve()
    }
    console.error(line)
    return Promise.all([
      client.app.log({ body: { service: "gatehost", level: variant === "error" ? "error" : "warn", message, extra: { sessionID } } }).catch(() => {}),
      client.tui.showToast({ body: { title: "gatehost", message, variant, duration: 15000 } }).catch(() => {}),
    ])
  }

  async function sendBack(sessionID, reason) {
    lastReason.set(sessionID, reason)
    const res = await client.session.promptAsync({
      path: { id: sessionID },
      body: { parts: [{ type: "text", text: reason }] },
    })
    if (res && res.error) throw new Error(`could not send the agent back: ${JSON.stringify(res.error).slice(0, 300)}`)
  }

  // Under plain `opencode run` everything up to process.exitCode happens
  // before the first await.
  async function gate(sessionID) {
    if (GATEHOST.command === null) {
      if (!canContinue) process.exitCode = 1
      await tell(sessionID, "this gatehost plugin was not written by `gatehost hook install opencode` (it names no command); the work was not accepted", "error")
      return
    }
    const payload = payloadFor(sessionID)
    let answer
    try {
      answer = canContinue ? await runGatehost(payload, payload.cwd) : runGatehostSync(payload, payload.cwd)
      failures.delete(sessionID)
    } catch (e) {
      const n = (failures.get(sessionID) || 0) + 1
      failures.set(sessionID, n)
      const message = `gatehost could not run the gate; the work was not accepted: ${e.message}`
      if (!canContinue) process.exitCode = 1
      if (canContinue && n === 1) {
        await tell(sessionID, message, "error")
        await sendBack(sessionID, message)
      } else {
        failures.delete(sessionID)
        await tell(sessionID, message, "error")
      }
      return
    }
    if (answer.decision === "block") {
      if (canContinue) return sendBack(sessionID, answer.reason)
      process.exitCode = 1
      await tell(sessionID, `the work was not accepted (\`opencode run\` exits when the session is idle, so the agent could not be sent back; continue it with \`opencode run -s ${sessionID}\`): ${answer.reason}`, "error")
      return
    }
    lastReason.delete(sessionID)
    if (typeof answer.systemMessage === "string" && answer.systemMessage.trim() !== "") {
      if (!canContinue) process.exitCode = 1
      await tell(sessionID, answer.systemMessage.replace(/^gatehost:\s*/, ""), "warning")
    }
  }

  return {
    event: async ({ event }) => {
      if (!event || typeof event.type !== "string") return
      track(event)
      if (event.type !== "session.idle") return
      const sessionID = event.properties && event.properties.sessionID
      if (typeof sessionID !== "string" || inFlight.has(sessionID)) return
      inFlight.add(sessionID)
      try {
        await gate(sessionID)
      } catch (e) {
        if (!canContinue) process.exitCode = 1
        await tell(sessionID, `gatehost plugin error; the work was not accepted: ${e && e.message}`, "error")
      } finally {
        inFlight.delete(sessionID)
      }
    },
  }
}
