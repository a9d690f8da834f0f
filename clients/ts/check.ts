// An integrator's program: a client generated from generated/openapi.json (openapi-typescript)
// and called with openapi-fetch, from inside a runtime the daemon launched. It creates a task in
// the channel named by its argument, reads it back and lists projects; `tsc --strict` proves the
// generated types fit what it reads, and the checks below prove the live answers fit them.
// scripts/ts-client-check generates openapi.d.ts beside this file, compiles and runs it.

import { readFileSync } from "node:fs";
import createClient from "openapi-fetch";
import type { components, paths } from "./openapi.js";

type Task = components["schemas"]["Task"];

function fail(message: string): never {
  console.error(`ts-client-check: ${message}`);
  process.exit(1);
}

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") fail(`${name} is not set: run inside a runtime`);
  return value;
}

const channelId = process.argv[2] ?? fail("usage: check.js CHANNEL_ID");
const base = new URL(env("AGENTTEAM_EXEC_BASE_URL"));
const route = /^\/api\/internal\/exec\/servers\/([^/]+)\/agents\/([^/]+)$/.exec(base.pathname);
if (route === null) fail(`not an Exec base URL: ${base.pathname}`);
const [, serverId = "", agentId = ""] = route;
const token = readFileSync(env("AGENTTEAM_EXEC_TOKEN_FILE"), "utf8").trim();

const client = createClient<paths>({
  baseUrl: base.origin,
  headers: { Authorization: `Bearer ${token}` },
});
const path = { serverId, agentId };

function checkTask(task: Task, title: string): void {
  if (typeof task.id !== "string" || task.id === "") fail(`task.id: ${JSON.stringify(task.id)}`);
  if (task.title !== title) fail(`task.title: ${JSON.stringify(task.title)}`);
  if (task.status !== "open") fail(`task.status: ${JSON.stringify(task.status)}`);
  if (task.location.kind !== "channel" || task.location.channelId !== channelId) {
    fail(`task.location: ${JSON.stringify(task.location)}`);
  }
  if (typeof task.revision !== "number") fail(`task.revision: ${JSON.stringify(task.revision)}`);
  if (Number.isNaN(Date.parse(task.createdAt))) fail(`task.createdAt: ${task.createdAt}`);
}

const title = "Typed from TypeScript";
const created = await client.POST(
  "/api/internal/exec/servers/{serverId}/agents/{agentId}/task/create",
  {
    params: { path },
    body: {
      location: { kind: "channel", channelId },
      title,
      requestId: `ts-check-${process.pid}-${Date.now()}`,
    },
  },
);
if (created.data === undefined) fail(`task create: ${JSON.stringify(created.error)}`);
checkTask(created.data.data.task, title);

const got = await client.POST("/api/internal/exec/servers/{serverId}/agents/{agentId}/task/get", {
  params: { path },
  body: { taskId: created.data.data.task.id },
});
if (got.data === undefined) fail(`task get: ${JSON.stringify(got.error)}`);
checkTask(got.data.data.task, title);
if (got.data.data.task.id !== created.data.data.task.id) fail("task get answered another task");

const listed = await client.POST(
  "/api/internal/exec/servers/{serverId}/agents/{agentId}/project/list",
  { params: { path }, body: { limit: 5 } },
);
if (listed.data === undefined) fail(`project list: ${JSON.stringify(listed.error)}`);
const { projects, hasMore } = listed.data.data;
if (!Array.isArray(projects) || typeof hasMore !== "boolean") {
  fail(`project list: ${JSON.stringify(listed.data.data)}`);
}
for (const project of projects) {
  if (typeof project.id !== "string" || typeof project.name !== "string") {
    fail(`project: ${JSON.stringify(project)}`);
  }
}

// A refusal is typed too: the error envelope's closed code.
const refused = await client.POST("/api/internal/exec/servers/{serverId}/agents/{agentId}/task/get", {
  params: { path },
  body: { taskId: "task_doesnotexist0000" },
});
if (refused.error === undefined) fail("a task that does not exist was found");
if (refused.error.error.code !== "not_found") fail(`refusal: ${JSON.stringify(refused.error)}`);

console.log(`ts-client-check: ok (task ${created.data.data.task.id}, ${projects.length} projects)`);
