"""The OpenCode plugin ``engram setup opencode`` writes: engram's hooks, as OpenCode runs them.

OpenCode has no hooks file: it loads the JavaScript modules in ``.opencode/plugins/`` (and
``~/.config/opencode/plugins/``) and calls the functions a plugin returns at its events. This
plugin runs ``engram hook opencode EVENT`` for each hook ``HOOKS`` declares for OpenCode, with
a JSON payload on stdin shaped as the other agents send it (``hook_event_name``, ``session_id``,
``cwd``, ``tool_name``, ``tool_input`` with ``file_path``, ``prompt``,
``last_assistant_message``), and puts what engram answers where OpenCode's plugin API documents
that the model reads it:

- ``session.created`` (an event): the briefing, asked once per session; it is added to the
  system prompt of every request of the session (``experimental.chat.system.transform``);
- ``chat.message``: recall for the person's prompt, added to the system prompt of the requests
  that answer it;
- ``tool.execute.before`` on the read and edit tools: what the memory says about the file,
  appended to the tool's output (``tool.execute.after``), the result the model edits from; an
  answer that asks or denies (engram denies an edit once where its memories were not shown yet,
  or a pinned pitfall holds it) stops the edit once with the reason as its error, so the model
  reads it before it writes;
- ``tool.execute.after`` on the shell tool: recall for a command that failed (its exit code,
  from the tool's metadata), appended to the command's output, which the model reads next;
- ``experimental.session.compacting``: the session captured, and the briefing given to the
  summary;
- ``experimental.text.complete``: the session captured at each finished text of an answer, and
  the line saying what was proposed shown as a toast. OpenCode awaits this hook before the
  answer is done, where it does not await an event handler: ``opencode run`` exits at
  ``session.idle`` while a capture started there may still be running, and it is lost.

OpenCode keeps no transcript file a hook could be pointed at (its sessions live in its own
database), so at those two moments the plugin asks OpenCode's client for the session's messages
(``client.session.messages``: ``{info, parts}`` each, the parts holding the tool calls with
their input, output, status and metadata) and writes them, one JSON line per message and each
string cut at ``LONGEST`` characters, to ``.engram/state/opencode/<session>.jsonl`` of the
project (mode 0600, replaced whole through a temporary file), passed as ``transcript_path``
(``engram.agents.transcript`` reads it). The file goes when OpenCode deletes the session, and
files of sessions not written for ``KEPT_DAYS`` days go when the plugin loads; a project
without ``.engram/`` gets no file, and only the last answer is read.

Where engram cannot be started, one toast says so once, and the model is told its tools are
missing. The plugin never throws into OpenCode otherwise. Pure: it renders the file's text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from engram.agents.hookspec import HOOKS

PLUGIN_FILE: Final = "engram.js"
OWNED: Final = "written by `engram setup"  # the line that marks a file engram owns whole

_PLUGIN: Final = r"""// engram: the project's memory in OpenCode, OWNED opencode`; a later setup
// rewrites this file, so edits here do not last. It runs `engram hook opencode EVENT` with a
// JSON payload on stdin and puts engram's answer where the model reads it.
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";

const ENGRAM = __ENGRAM__;
const HOOKS = __HOOKS__;
const MISSING = __MISSING__;
const LONGEST = 65536; // characters of one string kept in a session's transcript file
const KEPT_DAYS = 14; // transcript files of sessions untouched this long are removed

function run(hook, payload) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(ENGRAM[0], [...ENGRAM.slice(1), "hook", "opencode", hook.event], {
        cwd: payload.cwd,
        stdio: ["pipe", "pipe", "ignore"],
      });
    } catch (error) {
      resolve({ missing: true, out: "" });
      return;
    }
    let out = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), hook.timeout * 1000);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (data) => {
      out += data;
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ missing: error.code === "ENOENT" || error.code === "EACCES", out: "" });
    });
    child.on("close", () => {
      clearTimeout(timer);
      resolve({ missing: false, out });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// engram prints the JSON the other agents read, or plain text: context, a notice, a decision.
function answer(out) {
  const text = out.trim();
  if (!text) return { context: "", notice: "", ask: "" };
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return { context: text, notice: "", ask: "" };
  }
  const specific = (data && data.hookSpecificOutput) || {};
  const decision = specific.permissionDecision;
  return {
    context: specific.additionalContext || data.additional_context || "",
    notice: data.systemMessage || "",
    ask: decision === "ask" || decision === "deny" ? specific.permissionDecisionReason || "" : "",
  };
}

function toolInput(args) {
  const input = { ...(args || {}) };
  const path = input.filePath || input.path;
  if (typeof path === "string") input.file_path = path;
  if (typeof input.patchText === "string") input.patch = input.patchText;
  return input;
}

function matches(hook, tool) {
  return !hook.matcher || new RegExp(`^(?:${hook.matcher})$`).test(tool);
}

// The session's messages are written, one JSON line per message as OpenCode's client gives
// them ({info, parts}), to .engram/state/opencode/<session>.jsonl of the project, for engram to
// read what happened (the commands, their exit codes, the edits). Long strings are cut.
function transcriptFolder(roots) {
  for (const root of roots) {
    const engram = root ? join(root, ".engram") : "";
    if (engram && existsSync(engram)) return join(engram, "state", "opencode");
  }
  return "";
}

function clipped(key, value) {
  const long = typeof value === "string" && value.length > LONGEST;
  return long ? `${value.slice(0, LONGEST)} …` : value;
}

function prune(folder) {
  try {
    const old = Date.now() - KEPT_DAYS * 86400000;
    for (const name of readdirSync(folder)) {
      const file = join(folder, name);
      if (name.endsWith(".jsonl") && statSync(file).mtimeMs < old) unlinkSync(file);
    }
  } catch {}
}

export const EngramPlugin = async ({ client, directory, worktree }) => {
  const cwd = directory || worktree || process.cwd();
  const briefs = new Map(); // session id -> Promise of the briefing
  const prompts = new Map(); // session id -> recall for the latest prompt
  const pending = new Map(); // tool call id -> what the memory says about its files
  const stopped = new Set(); // files whose edit was stopped once with a pitfall
  const folder = transcriptFolder([directory, worktree]); // the nearest .engram/ first
  if (folder) prune(folder);
  let missing = false;

  function transcriptOf(session) {
    const named = folder && typeof session === "string" && /^[A-Za-z0-9_-]{1,200}$/.test(session);
    return named ? join(folder, `${session}.jsonl`) : "";
  }

  async function say(message, variant) {
    try {
      await client.tui.showToast({ body: { message, variant } });
    } catch {}
    try {
      await client.app.log({ body: { service: "engram", level: "info", message } });
    } catch {}
  }

  async function call(native, payload, tool) {
    const hooks = HOOKS.filter((hook) => hook.native === native && (!tool || matches(hook, tool)));
    const found = { context: "", notice: "", ask: "" };
    for (const hook of hooks) {
      const result = await run(hook, { hook_event_name: native, cwd, ...payload });
      if (result.missing) {
        if (!missing) {
          missing = true;
          await say(MISSING, "warning");
        }
        return found;
      }
      const got = answer(result.out);
      found.context = [found.context, got.context].filter(Boolean).join("\n\n");
      found.notice = found.notice || got.notice;
      found.ask = found.ask || got.ask;
    }
    return found;
  }

  function brief(session) {
    if (!briefs.has(session)) {
      briefs.set(
        session,
        call("session.created", { session_id: session, source: "startup" }).then((a) => a.context),
      );
    }
    return briefs.get(session);
  }

  // Fetch the session's messages; write them to its transcript file. Return the file ('' if
  // none was written) and the text of the last answer. At text.complete OpenCode has not
  // stored the finished text yet: the part is given it (partID, text) before the write.
  async function snapshot(session, partID, text) {
    let messages = [];
    try {
      const result = await client.session.messages({ path: { id: session } });
      messages = (result && result.data) || result || [];
    } catch {}
    if (!Array.isArray(messages)) messages = [];
    for (const message of partID ? messages : []) {
      for (const part of (message && message.parts) || []) {
        if (part && part.id === partID && part.type === "text") part.text = text;
      }
    }
    let last = "";
    for (let index = messages.length - 1; index >= 0; index--) {
      const message = messages[index];
      if (message && message.info && message.info.role === "assistant") {
        last = (message.parts || [])
          .filter((part) => part.type === "text" && part.text)
          .map((part) => part.text)
          .join("\n");
        break;
      }
    }
    let file = messages.length ? transcriptOf(session) : "";
    if (file) {
      const temp = join(folder, `.${session}.${process.pid}.tmp`);
      try {
        mkdirSync(folder, { recursive: true, mode: 0o700 });
        const lines = messages.map((message) => JSON.stringify(message, clipped));
        writeFileSync(temp, `${lines.join("\n")}\n`, { mode: 0o600 });
        renameSync(temp, file);
      } catch {
        file = "";
        try {
          unlinkSync(temp);
        } catch {}
      }
    }
    return { file, last };
  }

  async function capture(native, session, partID, text) {
    const { file, last } = await snapshot(session, partID, text);
    const message = text || last;
    if (!message && !file) return;
    const payload = { session_id: session, last_assistant_message: message };
    if (file) payload.transcript_path = file;
    const got = await call(native, payload);
    if (got.notice) await say(got.notice, "info");
  }

  return {
    event: async ({ event }) => {
      if (event.type === "session.created") {
        await brief(event.properties.info.id); // ready before the session's first prompt
      } else if (event.type === "session.deleted") {
        briefs.delete(event.properties.info.id);
        prompts.delete(event.properties.info.id);
        const file = transcriptOf(event.properties.info.id);
        try {
          if (file) unlinkSync(file);
        } catch {}
      }
    },
    "chat.message": async (input, output) => {
      const text = (output.parts || [])
        .filter((part) => part.type === "text" && !part.synthetic && part.text)
        .map((part) => part.text)
        .join("\n");
      if (!text.trim()) return;
      const payload = { session_id: input.sessionID, prompt: text };
      const file = transcriptOf(input.sessionID);
      if (file && existsSync(file)) payload.transcript_path = file; // as of the last answer
      const got = await call("chat.message", payload);
      prompts.set(input.sessionID, got.context);
    },
    "experimental.chat.system.transform": async (input, output) => {
      const session = input.sessionID;
      if (!session) return;
      const briefing = await brief(session);
      if (briefing) output.system.push(briefing);
      const recalled = prompts.get(session);
      if (recalled) output.system.push(recalled);
      if (missing) output.system.push(MISSING);
    },
    "tool.execute.before": async (input, output) => {
      const native = "tool.execute.before";
      if (!HOOKS.some((hook) => hook.native === native && matches(hook, input.tool))) return;
      const args = toolInput(output.args);
      const payload = { session_id: input.sessionID, tool_name: input.tool, tool_input: args };
      const got = await call(native, payload, input.tool);
      const key = `${input.sessionID}:${args.file_path || args.patch || ""}`;
      if (got.ask && !stopped.has(key)) {
        stopped.add(key); // once: the edit goes through when the model makes it again
        const note = "(engram stopped this edit once: weigh the note above, then edit again.)";
        throw new Error(`${got.context || got.ask}\n\n${note}`);
      }
      if (got.context) pending.set(input.callID, got.context);
    },
    "tool.execute.after": async (input, output) => {
      const native = "tool.execute.after";
      let context = pending.get(input.callID) || "";
      pending.delete(input.callID);
      if (HOOKS.some((hook) => hook.native === native && matches(hook, input.tool))) {
        const meta = (output && output.metadata) || {};
        const code = [meta.exit, meta.exitCode, meta.exit_code].find((v) => Number.isInteger(v));
        const response = { output: typeof output.output === "string" ? output.output : "" };
        if (code !== undefined) response.exit_code = code;
        const payload = {
          session_id: input.sessionID,
          tool_name: input.tool,
          tool_input: toolInput(input.args),
          tool_response: response,
        };
        const got = await call(native, payload, input.tool);
        context = [context, got.context].filter(Boolean).join("\n\n");
      }
      if (context && typeof output.output === "string") {
        output.output = `${output.output}\n\n${context}`;
      }
    },
    "experimental.text.complete": async (input, output) => {
      const text = typeof output.text === "string" ? output.text : "";
      if (!text.trim()) return;
      await capture("experimental.text.complete", input.sessionID, input.partID, text);
    },
    "experimental.session.compacting": async (input, output) => {
      await capture("experimental.session.compacting", input.sessionID, "", "");
      const briefing = await brief(input.sessionID);
      if (briefing) output.context.push(briefing);
    },
  };
};
"""


def plugin_text(prefix: Sequence[str], missing: str) -> str:
    """Return the plugin's source for the engram command ``prefix``."""
    hooks = [
        {
            "event": spec.event,
            "native": spec.native,
            "matcher": spec.matcher,
            "timeout": spec.timeout,
        }
        for spec in HOOKS
        if spec.agent == "opencode"
    ]
    return (
        _PLUGIN.replace("OWNED", OWNED)
        .replace("__ENGRAM__", json.dumps(list(prefix)))
        .replace("__HOOKS__", json.dumps(hooks))
        .replace("__MISSING__", json.dumps(missing))
    )
