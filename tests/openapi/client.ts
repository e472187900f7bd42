// A TypeScript client written against the types openapi-typescript generates from the
// served document (api.d.ts): it compiles with tsc --strict only if the document names the
// operations, bodies and answers a platform would use.
import type { paths } from "./api";

type Create = paths["/openapi/v1/trainjob"]["post"];
type CreateBody = Create["requestBody"]["content"]["application/json"];
type CreateAnswer = Create["responses"]["200"]["content"]["application/json"];
type JobAnswer = paths["/openapi/v1/trainjob/{jobId}"]["get"]["responses"]["200"]["content"]["application/json"];
type Refused = Create["responses"]["400"]["content"]["application/json"];

export const body: CreateBody = {
  name: "demo",
  tasks: [{ name: "train", command: "python3 train.py", resourceSpecId: "cpu-1", replicaNumber: 2 }],
};

// One center per replica, "" for a replica not placed yet.
export function centersOf(answer: CreateAnswer): string[] {
  return answer.data?.taskInfos?.[0]?.centerIDs ?? [];
}

export function statusOf(answer: JobAnswer): string {
  return answer.data?.status ?? "unknown";
}

export function whyRefused(answer: Refused): string {
  return `${answer.code}: ${answer.errorMsg}`;
}

export async function submit(base: string, token: string): Promise<string[]> {
  const response = await fetch(`${base}/openapi/v1/trainjob`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return centersOf((await response.json()) as CreateAnswer);
}
