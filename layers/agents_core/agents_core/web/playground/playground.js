// The serverless-agents playground: chat through the Responses API (a conversation) or the
// Agents API (an agent, a session, turns), answer function tools and MCP approvals, and see each
// run's trace. Plain JavaScript, no build step, no outside request: every call goes to this
// page's own API, with the key the user typed (kept in sessionStorage, never anywhere else).
"use strict";

const store = window.sessionStorage;
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- small helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function remember(name, value) {
  if (value === null || value === undefined) store.removeItem("pg." + name);
  else store.setItem("pg." + name, JSON.stringify(value));
}

function recall(name, fallback) {
  try {
    const value = store.getItem("pg." + name);
    return value === null ? fallback : JSON.parse(value);
  } catch (_) {
    return fallback;
  }
}

function status(text, isError) {
  $("status").textContent = text || "";
  $("status").classList.toggle("error", Boolean(isError));
}

function short(text, size) {
  const value = typeof text === "string" ? text : JSON.stringify(text);
  return value && value.length > size ? value.slice(0, size) + "…" : value || "";
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(statusCode, message) {
    super(message);
    this.statusCode = statusCode;
  }
}

// The API's root: the folder the page is served from (/ locally, /<stage>/ behind API Gateway).
const ROOT = new URL(".", window.location.href);

function headers(extra) {
  const result = Object.assign({}, extra);
  const key = $("key").value.trim();
  if (key) result.Authorization = "Bearer " + key;
  return result;
}

async function failure(response) {
  let message = response.status + " " + response.statusText;
  try {
    const body = await response.json();
    const detail = body.error ? body.error.message : body.detail;
    message = typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch (_) {
    // not JSON: the status line says enough
  }
  if (response.status === 401 || response.status === 403) {
    message = "This API needs a key: type it in the API key field. (" + message + ")";
  }
  return new ApiError(response.status, message);
}

async function api(method, path, body) {
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(new URL(path, ROOT), init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

// Server-Sent Events read with fetch (EventSource cannot send a key or a POST body).
async function* events(method, path, body) {
  const init = {
    method,
    headers: headers(Object.assign({ Accept: "text/event-stream" },
      body ? { "Content-Type": "application/json" } : {})),
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(new URL(path, ROOT), init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) yield event;
    }
  }
}

function parseEvent(block) {
  const event = { id: null, data: [] };
  for (const line of block.split("\n")) {
    const colon = line.indexOf(":");
    if (colon === 0) continue; // a comment (keep-alive)
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") event.id = value;
    else if (field === "data") event.data.push(value);
  }
  if (!event.data.length) return null;
  const data = event.data.join("\n");
  if (data === "[DONE]") return null;
  return { id: event.id, data: JSON.parse(data) };
}

// ---------------------------------------------------------------- state

const state = {
  mode: "responses",
  conversation: null, // Responses: the conversation id
  agent: null, // Agents: the agent id, its settings, the session id
  agentSettings: null,
  session: null,
  functions: [], // function tools declared in the page: {name, description, parameters}
  busy: false,
};

function saveChat() {
  remember("chat", {
    mode: state.mode,
    conversation: state.conversation,
    agent: state.agent,
    agentSettings: state.agentSettings,
    session: state.session,
  });
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
}

// ---------------------------------------------------------------- the chat log

function log(node) {
  $("log").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function userMessage(text) {
  return log(el("div", { class: "msg user", text }));
}

// The answer being written: the one element with data-testid="answer" is always the last one.
function newAnswer(text) {
  for (const old of document.querySelectorAll('[data-testid="answer"]')) {
    old.removeAttribute("data-testid");
  }
  return log(el("div", { class: "msg assistant", "data-testid": "answer", text: text || "" }));
}

function note(text, kind) {
  return log(el("div", { class: "note " + (kind || ""), text }));
}

function runFooter(label, open) {
  const footer = el("div", { class: "note" }, label + " ",
    el("button", { type: "button", class: "small", text: "trace", onclick: open }));
  return log(footer);
}

function clearChat() {
  $("log").replaceChildren();
  $("pending").replaceChildren();
  traceHint("Send a message: each run's steps show here.");
}

function traceHint(text) {
  $("trace").replaceChildren(el("p", { class: "hint", text }));
}

// ---------------------------------------------------------------- run settings

function selectedModel() {
  return $("model").value;
}

function shieldIds() {
  return $("shields").value.split(",").map((s) => s.trim()).filter(Boolean);
}

function responseTools() {
  const tools = [];
  if ($("tool-web_search").checked) tools.push({ type: "web_search" });
  const store_id = $("tool-file_search").value.trim();
  if (store_id) tools.push({ type: "file_search", vector_store_ids: [store_id] });
  const url = $("mcp-url").value.trim();
  if (url) {
    tools.push({
      type: "mcp",
      server_label: $("mcp-label").value.trim() || "tools",
      server_url: url,
      require_approval: $("mcp-approval").value,
    });
  }
  for (const fn of state.functions) {
    tools.push({ type: "function", name: fn.name, description: fn.description, parameters: fn.parameters });
  }
  return tools;
}

// A function tool as the Agents API (v0.2.14) declares a client tool: a list of parameters.
function clientTool(fn) {
  const schema = fn.parameters || {};
  const required = schema.required || [];
  return {
    name: fn.name,
    description: fn.description,
    parameters: Object.entries(schema.properties || {}).map(([name, prop]) => ({
      name,
      parameter_type: prop.type || "string",
      description: prop.description || name,
      required: required.includes(name),
    })),
  };
}

function agentConfig() {
  const toolgroups = [];
  if ($("tool-web_search").checked) toolgroups.push("builtin::websearch");
  const store_id = $("tool-file_search").value.trim();
  if (store_id) toolgroups.push({ name: "builtin::rag", args: { vector_db_ids: [store_id] } });
  for (const id of $("toolgroups").value.split(",").map((s) => s.trim()).filter(Boolean)) {
    toolgroups.push(id);
  }
  const shields = shieldIds();
  return {
    model: selectedModel(),
    instructions: $("instructions").value,
    toolgroups,
    client_tools: state.functions.map(clientTool),
    input_shields: shields,
    output_shields: shields,
    enable_session_persistence: true,
  };
}

function renderFunctions() {
  $("functions").replaceChildren(...state.functions.map((fn, index) =>
    el("li", {}, fn.name + " ",
      el("button", {
        type: "button", class: "small", text: "remove",
        onclick: () => { state.functions.splice(index, 1); remember("functions", state.functions); renderFunctions(); },
      }))));
}

function addFunction() {
  const name = $("fn-name").value.trim();
  let parameters;
  try {
    parameters = JSON.parse($("fn-parameters").value || "{}");
  } catch (err) {
    status("The parameters are not JSON: " + err.message, true);
    return;
  }
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
    status("A function name is letters, digits, _ and - (64 at most).", true);
    return;
  }
  state.functions = state.functions.filter((fn) => fn.name !== name);
  state.functions.push({ name, description: $("fn-description").value.trim(), parameters });
  remember("functions", state.functions);
  renderFunctions();
  status("Function tool " + name + " added: the page asks you for its result when the model calls it.");
}

// ---------------------------------------------------------------- Responses API

function responseBody(input) {
  const body = {
    model: selectedModel(),
    input,
    conversation: state.conversation,
    stream: true,
    tools: responseTools(),
  };
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  const guardrails = shieldIds();
  if (guardrails.length) body.guardrails = guardrails;
  return body;
}

async function sendResponse(text) {
  if (!state.conversation) {
    const conversation = await api("POST", "v1/conversations", {
      metadata: { title: short(text, 200), source: "playground" },
    });
    state.conversation = conversation.id;
    saveChat();
    refreshSessions();
  }
  userMessage(text);
  await runResponse(text, text);
}

async function runResponse(input, prompt) {
  const run = { kind: "response", id: null, seq: -1, text: "", prompt, conversation: state.conversation };
  const answer = newAnswer();
  answer.classList.add("streaming");
  traceHint("Running: the trace shows when the run ends.");
  await followResponse(events("POST", "v1/responses", responseBody(input)), run, answer);
}

/**
 * Read a run's stream to its end, each event to `onEvent`; the run's place (id, last event
 * number, text so far) is kept in sessionStorage for a reload to rejoin. The run's end is the
 * last thing `onEvent` returned that is not null.
 */
async function followStream(stream, run, answer, onEvent) {
  let end = null;
  answer.classList.add("streaming");
  try {
    for await (const event of stream) {
      end = onEvent(event) || end;
      if (run.id) remember("running", run);
    }
  } finally {
    answer.classList.remove("streaming");
  }
  remember("running", null);
  return end;
}

async function followResponse(stream, run, answer) {
  const waiting = [];
  const final = await followStream(stream, run, answer, ({ data }) => {
    if (typeof data.sequence_number === "number") run.seq = data.sequence_number;
    switch (data.type) {
      case "response.created":
        run.id = data.response.id;
        break;
      case "response.output_text.delta":
      case "response.refusal.delta":
        run.text += data.delta;
        answer.textContent = run.text;
        if (data.type === "response.refusal.delta") answer.classList.add("refusal");
        break;
      case "response.output_item.done":
        responseItem(data.item, waiting);
        break;
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
      case "response.cancelled":
        return data.response;
      default:
        break;
    }
    return null;
  });
  if (!final) throw new Error("The stream ended before the response did.");
  if (!run.text) answer.textContent = outputText(final) || "";
  if (final.status === "failed") {
    const error = final.error || {};
    status("The response failed: " + (error.message || error.code || "no reason given"), true);
  } else if (final.status === "incomplete") {
    status("The response is incomplete: " + JSON.stringify(final.incomplete_details));
  } else {
    status("");
  }
  runFooter("response " + final.id, () => showTrace({ kind: "response", id: final.id }));
  for (const item of waiting) askFor(item);
  showTrace({ kind: "response", id: final.id });
}

function outputText(response) {
  const parts = [];
  for (const item of response.output || []) {
    if (item.type !== "message") continue;
    for (const part of item.content || []) parts.push(part.text || part.refusal || "");
  }
  return parts.join("");
}

// What an output item shows in the log; calls that wait for the user are kept for the end.
function responseItem(item, waiting) {
  switch (item.type) {
    case "web_search_call":
      note("web_search_call " + short((item.action && item.action.query) || "", 120));
      break;
    case "file_search_call":
      note("file_search_call " + short((item.queries || []).join(", "), 120) +
        " → " + (item.results || []).length + " results");
      break;
    case "mcp_list_tools":
      note("mcp_list_tools " + item.server_label + ": " + (item.tools || []).map((t) => t.name).join(", ") +
        (item.error ? " (" + item.error + ")" : ""));
      break;
    case "mcp_call":
      note("mcp_call " + item.server_label + "." + item.name + "(" + short(item.arguments, 200) + ") → " +
        short(item.error || item.output, 300), item.error ? "blocked" : "");
      break;
    case "function_call":
    case "mcp_approval_request":
      waiting.push(item);
      break;
    default:
      break;
  }
}

// A function call the page answers, or an MCP call waiting for approval.
function askFor(item) {
  if (item.type === "function_call") askFunctionResult(item);
  else if (item.type === "mcp_approval_request") askApproval(item);
}

function askFunctionResult(call) {
  const output = el("input", { "data-testid": "function-output", placeholder: "the function's result" });
  const box = el("div", { class: "pending", "data-testid": "function-call" },
    el("div", {}, "The model called ", el("code", { text: call.name + "(" + call.arguments + ")" }),
      ". What does it return?"),
    el("div", { class: "row" }, output,
      el("button", {
        type: "button", "data-testid": "function-submit", text: "Send result",
        onclick: () => {
          box.remove();
          const answer = { type: "function_call_output", call_id: call.call_id, output: output.value };
          userMessage(call.name + " → " + output.value);
          act(() => runResponse([answer], call.name + " → " + output.value));
        },
      })));
  $("pending").append(box);
  output.focus();
}

function askApproval(request) {
  const decide = (approve) => () => {
    box.remove();
    note((approve ? "approved " : "denied ") + request.server_label + "." + request.name, approve ? "passed" : "blocked");
    const answer = { type: "mcp_approval_response", approval_request_id: request.id, approve };
    act(() => runResponse([answer], (approve ? "approved " : "denied ") + request.name));
  };
  const box = el("div", { class: "pending", "data-testid": "approval" },
    el("div", {}, "May the model call ", el("code", {
      text: request.server_label + "." + request.name + "(" + request.arguments + ")",
    }), "?"),
    el("div", { class: "row" },
      el("button", { type: "button", "data-testid": "approve", text: "Approve", onclick: decide(true) }),
      el("button", { type: "button", class: "deny", "data-testid": "deny", text: "Deny", onclick: decide(false) })));
  $("pending").append(box);
}

// ---------------------------------------------------------------- Agents API

async function sendTurn(text) {
  const settings = JSON.stringify(agentConfig());
  if (state.agent && state.agentSettings !== settings) {
    note("The run settings changed: a new agent and session.");
    state.agent = null;
    state.session = null;
  }
  if (!state.agent) {
    const created = await api("POST", "v1/agents", { agent_config: agentConfig() });
    state.agent = created.agent_id;
    state.agentSettings = settings;
  }
  if (!state.session) {
    const session = await api("POST", "v1/agents/" + state.agent + "/session", { session_name: short(text, 100) });
    state.session = session.session_id;
    saveChat();
    refreshSessions();
  }
  saveChat();
  userMessage(text);
  const run = { kind: "turn", agent: state.agent, session: state.session, id: null, seq: -1, text: "", prompt: text };
  const path = "v1/agents/" + state.agent + "/session/" + state.session + "/turn";
  await followTurn(events("POST", path, { messages: [{ role: "user", content: text }], stream: true }), run, newAnswer());
}

function turnPath(run) {
  return "v1/agents/" + run.agent + "/session/" + run.session + "/turn/" + run.id;
}

async function followTurn(stream, run, answer) {
  traceHint("Running: the trace shows when the run ends.");
  const ended = await followStream(stream, run, answer, ({ id, data }) => {
    if (id !== null) run.seq = Number(id);
    if (data.error) throw new Error(data.error.message || JSON.stringify(data.error));
    const payload = data.event.payload;
    switch (payload.event_type) {
      case "turn_start":
        run.id = payload.turn_id;
        break;
      case "step_progress":
        if (payload.delta && payload.delta.type === "text") {
          run.text += payload.delta.text;
          answer.textContent = run.text;
        }
        break;
      case "step_complete":
        stepNote(payload.step_details);
        break;
      case "turn_awaiting_input":
      case "turn_complete":
        return payload;
      default:
        break;
    }
    return null;
  });
  if (!ended) throw new Error("The stream ended before the turn did.");
  const turn = ended.turn;
  if (!run.text) answer.textContent = messageText(turn.output_message) || "";
  runFooter("turn " + turn.turn_id, () => showTrace(Object.assign({}, run, { kind: "turn" })));
  if (ended.event_type === "turn_awaiting_input") askClientTools(run, turn.output_message.tool_calls || []);
  status("");
  showTrace(Object.assign({}, run, { kind: "turn" }));
}

function messageText(message) {
  if (!message) return "";
  const content = message.content;
  if (typeof content === "string") return content;
  return (content || []).map((part) => part.text || "").join("");
}

function stepNote(step) {
  if (step.step_type === "shield_call") {
    const violation = step.violation;
    if (violation) note("shield_call: blocked (" + (violation.user_message || violation.violation_level) + ")", "blocked");
    else note("shield_call: passed", "passed");
  } else if (step.step_type === "tool_execution") {
    const results = {};
    for (const response of step.tool_responses || []) results[response.call_id] = response.content;
    for (const call of step.tool_calls || []) {
      note("tool_execution " + call.tool_name + "(" + short(call.arguments_json || call.arguments, 200) + ") → " +
        short(messageText({ content: results[call.call_id] }), 300));
    }
  }
}

function askClientTools(run, calls) {
  const inputs = calls.map((call) => el("input", { "data-testid": "function-output", placeholder: call.tool_name + "'s result" }));
  const box = el("div", { class: "pending", "data-testid": "function-call" },
    ...calls.map((call, i) => el("div", {}, "The agent called ",
      el("code", { text: call.tool_name + "(" + (call.arguments_json || JSON.stringify(call.arguments)) + ")" }),
      ". What does it return?", inputs[i])),
    el("div", { class: "row" }, el("button", {
      type: "button", "data-testid": "function-submit", text: "Send results",
      onclick: () => {
        box.remove();
        const tool_responses = calls.map((call, i) => ({ call_id: call.call_id, tool_name: call.tool_name, content: inputs[i].value }));
        userMessage(tool_responses.map((r) => r.tool_name + " → " + r.content).join("\n"));
        const resumed = Object.assign({}, run, { text: "" });
        act(() => followTurn(events("POST", turnPath(run) + "/resume", { tool_responses, stream: true }), resumed, newAnswer()));
      },
    })));
  $("pending").append(box);
}

// ---------------------------------------------------------------- the trace view

function traceUrl(run) {
  return run.kind === "response" ? "v1/responses/" + run.id + "/trace" : turnPath(run) + "/trace";
}

function milliseconds(value) {
  if (typeof value !== "number") return "";
  return value < 1000 ? value.toFixed(1) + " ms" : (value / 1000).toFixed(2) + " s";
}

// Each showTrace call's number: only the newest one draws (an earlier run's trace read late
// must not cover a later run's).
let traceAsked = 0;

async function showTrace(run) {
  const mine = ++traceAsked;
  const box = $("trace");
  traceHint("Reading the trace of " + run.id + "…");
  let trace = null;
  for (let attempt = 0; attempt < 6; attempt += 1) { // spans may be written just after the run
    try {
      trace = await api("GET", traceUrl(run));
    } catch (err) {
      if (mine !== traceAsked) return;
      box.replaceChildren(el("p", { class: "hint", text: "No trace for " + run.id + ": " + err.message }));
      return;
    }
    if (trace.complete !== false || mine !== traceAsked) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (mine === traceAsked) renderTrace(trace);
}

// The span's place on the run's timeline (set through the CSSOM: the page's policy forbids
// inline style attributes).
function bar(offset, width) {
  const node = el("span", { class: "bar" });
  node.style.left = offset.toFixed(2) + "%";
  node.style.width = width.toFixed(2) + "%";
  return node;
}

function renderTrace(trace) {
  const spans = (trace.spans || []).slice().sort((a, b) => a.started_at.localeCompare(b.started_at));
  // The timeline spans every run of the trace (a resumed turn has one per start and resume).
  const roots = spans.filter((s) => s.kind === "run");
  const root = roots[roots.length - 1];
  const start = Math.min(...spans.map((s) => Date.parse(s.started_at)));
  const end = Math.max(...spans.map((s) => Date.parse(s.completed_at)));
  const total = end - start || 1;
  const rows = spans.filter((s) => s.kind !== "run").map((span) => {
    const a = span.attributes || {};
    const tool = a["gen_ai.tool.name"];
    const details = [];
    if (span.kind === "inference") {
      if (a["gen_ai.request.model"]) details.push("model " + a["gen_ai.request.model"]);
      if (a["gen_ai.response.time_to_first_chunk_ms"] !== undefined) {
        details.push("first token " + milliseconds(a["gen_ai.response.time_to_first_chunk_ms"]));
      }
      if (a["gen_ai.usage.input_tokens"] !== undefined) {
        details.push("tokens " + a["gen_ai.usage.input_tokens"] + " in / " + a["gen_ai.usage.output_tokens"] + " out");
      }
    } else if (span.kind === "shield_call") {
      details.push(a["shield.violation"] ? "verdict: blocked (" + a["shield.violation"] + ")" : "verdict: passed");
    } else {
      if (a["gen_ai.tool.call.arguments"] !== undefined) details.push("arguments " + short(a["gen_ai.tool.call.arguments"], 160));
      if (a["gen_ai.tool.call.result"] !== undefined) details.push("result " + short(a["gen_ai.tool.call.result"], 160));
    }
    if (span.status === "error") details.push("error");
    const offset = Math.max(0, (Date.parse(span.started_at) - start) / total * 100);
    const width = Math.max(0.5, Math.min(100 - offset, span.duration_ms / total * 100));
    return el("li", { class: "step " + span.kind + (span.status === "error" ? " error" : ""), "data-testid": "trace-step" },
      bar(offset, width),
      el("div", { class: "head" },
        el("span", {}, el("span", { class: "kind", text: span.kind }), " " + (tool || span.name)),
        el("span", { class: "dur", text: milliseconds(span.duration_ms) })),
      details.length ? el("div", { class: "detail", text: details.join("\n") }) : null);
  });
  $("trace").replaceChildren(
    el("div", { class: "trace-id", "data-testid": "trace-id", text: "trace " + trace.trace_id }),
    el("div", { class: "hint", text: "run " + trace.run_id + (root ? " · " + milliseconds(root.duration_ms) : "") }),
    rows.length ? el("ol", {}, ...rows) : el("p", { class: "hint", text: "No steps." }));
}

// ---------------------------------------------------------------- past chats

async function refreshSessions() {
  const entries = [];
  try {
    const conversations = await api("GET", "v1/conversations?limit=20");
    for (const c of conversations.data) {
      entries.push({ kind: "conversation", id: c.id, title: (c.metadata && c.metadata.title) || c.id, at: c.created_at });
    }
    const agents = await api("GET", "v1/agents?limit=100");
    const newest = agents.data.slice().sort((a, b) => (a.agent_id < b.agent_id ? 1 : -1)).slice(0, 10);
    const lists = await Promise.all(newest.map((a) => api("GET", "v1/agents/" + a.agent_id + "/sessions?limit=20")));
    lists.forEach((list, i) => {
      for (const s of list.data) {
        entries.push({
          kind: "session", id: s.session_id, agent: newest[i].agent_id, title: s.session_name || s.session_id,
          at: Date.parse(s.started_at) / 1000,
        });
      }
    });
  } catch (err) {
    status(err.message, true);
    return;
  }
  entries.sort((a, b) => b.at - a.at);
  $("sessions").replaceChildren(...entries.map((entry) => {
    const current = entry.id === state.conversation || entry.id === state.session;
    return el("li", { class: current ? "current" : "", "data-kind": entry.kind, "data-id": entry.id },
      el("button", { type: "button", title: entry.id, onclick: () => act(() => reopen(entry)) },
        el("span", { class: "kind", text: entry.kind === "conversation" ? "conversation" : "agent session" }),
        entry.title));
  }));
}

function setMode(mode) {
  state.mode = mode;
  for (const radio of document.querySelectorAll('input[name="mode"]')) radio.checked = radio.value === mode;
}

async function reopen(entry) {
  clearChat();
  if (entry.kind === "conversation") {
    setMode("responses");
    state.conversation = entry.id;
    await showConversation(entry.id);
  } else {
    setMode("agents");
    state.agent = entry.agent;
    state.session = entry.id;
    state.agentSettings = JSON.stringify(agentConfig()); // continue with this agent until settings change
    await showSession(entry.agent, entry.id);
  }
  saveChat();
  refreshSessions();
}

async function showConversation(id) {
  const items = (await api("GET", "v1/conversations/" + id + "/items?order=asc&limit=100")).data;
  const answered = new Set();
  for (const item of items) {
    if (item.type === "function_call_output") answered.add(item.call_id);
    if (item.type === "mcp_approval_response") answered.add(item.approval_request_id);
  }
  const waiting = [];
  for (const item of items) {
    if (item.type === "message") {
      const text = messageText(item);
      if (item.role === "assistant") newAnswer(text);
      else userMessage(text);
    } else if (item.type === "function_call_output") {
      note("function_call_output " + short(item.output, 300));
    } else if (item.type === "mcp_approval_response") {
      note((item.approve ? "approved " : "denied ") + item.approval_request_id, item.approve ? "passed" : "blocked");
    } else {
      responseItem(item, waiting);
    }
  }
  for (const item of waiting) {
    if (!answered.has(item.type === "function_call" ? item.call_id : item.id)) askFor(item);
  }
  const responses = (await api("GET", "v1/responses?limit=100")).data
    .filter((r) => r.conversation && r.conversation.id === id);
  responses.sort((a, b) => a.created_at - b.created_at);
  for (const r of responses) runFooter("response " + r.id, () => showTrace({ kind: "response", id: r.id }));
  const last = responses[responses.length - 1];
  if (last) showTrace({ kind: "response", id: last.id });
}

async function showSession(agent, session, skip) {
  const page = await api("GET", "v1/agents/" + agent + "/session/" + session);
  let last = null;
  for (const turn of page.turns || []) {
    if (turn.turn_id === skip) continue; // running: its stream is rejoined
    userMessage(turn.input_messages.map(messageText).join("\n"));
    for (const step of turn.steps || []) stepNote(step);
    newAnswer(messageText(turn.output_message));
    const run = { kind: "turn", agent, session, id: turn.turn_id };
    runFooter("turn " + turn.turn_id, () => showTrace(run));
    last = run;
    if (!turn.completed_at && turn.output_message && (turn.output_message.tool_calls || []).length) {
      askClientTools(run, turn.output_message.tool_calls);
    }
  }
  if (last) showTrace(last);
}

// ---------------------------------------------------------------- a stream dropped by a reload

async function rejoin(run) {
  remember("running", null); // once: a rejoin that fails is not tried again at the next load
  userMessage(run.prompt || "");
  const answer = newAnswer(run.text);
  status("Rejoining the stream of " + run.id + " after event " + run.seq + "…");
  if (run.kind === "response") {
    state.conversation = run.conversation;
    answer.classList.add("streaming");
    const path = "v1/responses/" + run.id + "?stream=true&starting_after=" + run.seq;
    await followResponse(events("GET", path), run, answer);
  } else {
    const path = turnPath(run) + "/stream?starting_after=" + run.seq;
    await followTurn(events("GET", path), run, answer);
  }
}

// ---------------------------------------------------------------- start

// Run one user action at a time; any failure goes to the status line, never to the console.
async function act(action) {
  setBusy(true);
  try {
    await action();
  } catch (err) {
    status(err.message || String(err), true);
  } finally {
    setBusy(false);
  }
}

async function send() {
  const text = $("prompt").value.trim();
  if (!text || state.busy) return;
  $("prompt").value = "";
  $("pending").replaceChildren();
  status("");
  await act(() => (state.mode === "agents" ? sendTurn(text) : sendResponse(text)));
}

async function loadModels() {
  const models = (await api("GET", "v1/models")).data.filter((m) => (m.model_type || "llm") === "llm");
  const wanted = recall("model", null);
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.identifier || m.id, text: m.identifier || m.id })));
  if (wanted && models.some((m) => (m.identifier || m.id) === wanted)) $("model").value = wanted;
}

async function loadShields() {
  const shields = (await api("GET", "v1/shields")).data;
  $("shield-ids").replaceChildren(...shields.map((s) => el("option", { value: s.identifier })));
}

function bind() {
  $("key").value = recall("key", "");
  $("key").addEventListener("change", () => {
    remember("key", $("key").value.trim() || null);
    act(start);
  });
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); send(); }
  });
  $("model").addEventListener("change", () => remember("model", selectedModel()));
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", () => { state.mode = radio.value; saveChat(); });
  }
  $("new-chat").addEventListener("click", () => {
    Object.assign(state, { conversation: null, agent: null, agentSettings: null, session: null });
    saveChat();
    clearChat();
    refreshSessions();
  });
  $("refresh-sessions").addEventListener("click", () => refreshSessions());
  $("fn-add").addEventListener("click", addFunction);
  state.functions = recall("functions", []);
  renderFunctions();
}

async function start() {
  await Promise.all([loadModels(), loadShields()]);
  const chat = recall("chat", {});
  setMode(chat.mode || "responses");
  Object.assign(state, {
    conversation: chat.conversation || null,
    agent: chat.agent || null,
    agentSettings: chat.agentSettings || null,
    session: chat.session || null,
  });
  clearChat();
  if (state.mode === "responses" && state.conversation) await showConversation(state.conversation);
  const running = recall("running", null);
  if (state.mode === "agents" && state.session) {
    await showSession(state.agent, state.session, running && running.id);
  }
  if (running && running.id) await rejoin(running);
  await refreshSessions();
}

document.addEventListener("DOMContentLoaded", () => {
  bind();
  act(start);
});
