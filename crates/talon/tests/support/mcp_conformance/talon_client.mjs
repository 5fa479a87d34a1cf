// The client the MCP conformance suite launches for each client scenario
// (`node talon_client.mjs <scenario server URL>`, from `crates/talon/tests/mcp_conformance.rs`):
// an operator of the shipped `talon` binary, scripted. Everything MCP is done by `talon` itself,
// from its config file, with the commands an operator types:
//
//   1. write talon.toml: `[mcp_servers.conformance] url = …`, the protocol version the suite
//      names (left out, `auto`, when TALON_CONFORMANCE_AUTO is set), and for the authorization
//      scenarios `oauth = true` with the client the scenario pre-registered, if any;
//   2. `talon mcp-servers login conformance` for those, with a "browser" ($BROWSER) that opens
//      the authorization URL and follows its redirects (the suite's authorization servers
//      approve at once and redirect to Talon's loopback callback);
//   3. `talon mcp-servers test conformance`, `talon tools list --json` for the bridged tools and
//      their schemas;
//   4. `talon tool call mcp__conformance__<tool>` for each call the scenario names in
//      MCP_CONFORMANCE_CONTEXT.toolCalls (what a model would ask for), else for each tool with
//      arguments made from its schema, at a terminal (util-linux `script`) where the person
//      presses Enter at every question a server asks (taking the form's defaults).
//
// When a step says a sign-in is needed ("run `talon mcp-servers login …`": a login that expired,
// a server that moved its authorization server, a tool that needs more scopes), the operator
// signs in again and repeats the step, at most MAX_SIGN_INS times in all.

import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const MAX_SIGN_INS = 3;
const SERVER = "conformance";
const PREFIX = `mcp__${SERVER}__`;

const url = process.argv.at(-1);
const talon = process.env.TALON_BIN;
if (!talon || !url) {
  console.error("usage: TALON_BIN=<talon> node talon_client.mjs URL");
  process.exit(2);
}
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}");
const version = process.env.TALON_CONFORMANCE_AUTO
  ? null
  : process.env.MCP_CONFORMANCE_PROTOCOL_VERSION;
const auth = scenario.startsWith("auth/");

// The operator's home: the configuration and the data directory, outside the workspace the
// tools work in (Talon refuses a configuration its agents could write).
const home = mkdtempSync(join(tmpdir(), "talon-conformance-"));
const workspace = join(home, "work");
mkdirSync(workspace);
const toml = (s) => JSON.stringify(s);
const config = [
  `[mcp_servers.${SERVER}]`,
  `url = ${toml(url)}`,
  version ? `protocol_version = ${toml(version)}` : null,
  auth ? "oauth = true" : null,
  auth && context.client_id ? `oauth_client_id = ${toml(context.client_id)}` : null,
  auth && context.client_secret ? `oauth_client_secret_env = "CONFORMANCE_CLIENT_SECRET"` : null,
  auth ? `oauth_client_metadata_url = "https://conformance-test.local/client-metadata.json"` : null,
]
  .filter((line) => line !== null)
  .join("\n");
writeFileSync(join(home, "talon.toml"), config + "\n");

// The "browser": opens the URL it is given and follows the redirects to the callback.
const browser = join(home, "browser.mjs");
writeFileSync(
  browser,
  `#!/usr/bin/env node\nawait fetch(process.argv[2]).then((r) => r.text()).catch((e) => console.error(e));\n`,
);
chmodSync(browser, 0o755);

const env = {
  ...process.env,
  HOME: home,
  TALON_CONFIG: join(home, "talon.toml"),
  TALON_DATA_DIR: join(home, "data"),
  BROWSER: browser,
  CONFORMANCE_CLIENT_SECRET: context.client_secret ?? "",
};

/// `talon <args…>`; at a terminal (`script`) with `typed` typed ahead when `terminal` is set.
function run(args, { terminal = false, typed = "" } = {}) {
  const quoted = [talon, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = terminal
    ? spawnSync("script", ["-qec", quoted, "/dev/null"], { env, cwd: workspace, input: typed })
    : spawnSync(talon, args, { env, cwd: workspace });
  const out = `${child.stdout ?? ""}${child.stderr ?? ""}`;
  console.log(`$ talon ${args.join(" ")}\n${out}`);
  return { ok: child.status === 0, out, stdout: `${child.stdout ?? ""}` };
}

let signIns = 0;

function signIn() {
  signIns += 1;
  const { ok } = run(["mcp-servers", "login", SERVER]);
  if (!ok) {
    console.error("talon conformance client: the sign-in failed");
    process.exit(1);
  }
}

/// Runs a step, signing in again while it says a sign-in is needed.
function step(args, options) {
  for (;;) {
    const result = run(args, options);
    const asksToSignIn = result.out.includes(`talon mcp-servers login ${SERVER}`);
    if (result.ok || !auth || !asksToSignIn || signIns >= MAX_SIGN_INS) {
      return result;
    }
    signIn();
  }
}

/// Arguments a caller would give: a plain value of each required property's type.
function argumentsFor(schema) {
  const out = {};
  for (const name of schema?.required ?? []) {
    const kind = schema?.properties?.[name]?.type ?? "string";
    out[name] =
      kind === "number" || kind === "integer"
        ? 1
        : kind === "boolean"
          ? false
          : kind === "array"
            ? []
            : kind === "object"
              ? {}
              : "conformance";
  }
  return out;
}

if (auth) {
  signIn();
}
if (!step(["mcp-servers", "test", SERVER]).ok) {
  process.exit(1);
}
const listed = step(["tools", "list", "--json"]);
const tools = JSON.parse(listed.stdout).filter((t) => t.name.startsWith(PREFIX));

let calls;
if (Array.isArray(context.toolCalls)) {
  calls = context.toolCalls.map((c) => [PREFIX + c.name, c.arguments ?? {}]);
} else {
  // In the schema-preservation scenario, a tool taking a `schema` is given the input schema of
  // the other tool as Talon lists it, which shows whether it reached Talon unchanged.
  const takesSchema = (t) => t.input_schema?.properties?.schema !== undefined;
  const echo = scenario === "json-schema-2020-12-preservation";
  const other = tools.find((t) => !takesSchema(t));
  calls = tools.map((t) => [
    t.name,
    echo && other && takesSchema(t) ? { schema: other.input_schema } : argumentsFor(t.input_schema),
  ]);
}

let failed = false;
for (const [name, args] of calls) {
  const { ok } = step(["tool", "call", name, "--args", JSON.stringify(args)], {
    terminal: true,
    typed: "\n".repeat(20),
  });
  failed ||= !ok;
}
process.exit(failed ? 1 : 0);
