// Validate custom resources against their CRDs' OpenAPI schemas, as compiled
// into validators by the @kubernetes-models npm packages (installed by
// `scripts/deploy-tools install` into the cache, not into the repository).
//
//   node deploy/schemas/validate-crds.mjs <node_modules dir> < resources.json
//
// stdin: a JSON array of resources. stdout: a JSON array, one entry per
// resource: {kind, name, status: "valid" | "invalid" | "no-schema", error?}.
// Exit code 0 whatever the verdicts; the caller (tests/unit/deploy) decides.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// API group -> the @kubernetes-models package generated from that project's CRDs.
const PACKAGES = {
  "keda.sh": "keda",
  "monitoring.coreos.com": "prometheus-operator",
};

const modules = process.argv[2];
if (!modules) {
  console.error("usage: validate-crds.mjs <node_modules dir> < resources.json");
  process.exit(2);
}
const resources = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const res of resources) {
  const [group, version] = res.apiVersion.split("/");
  const entry = { apiVersion: res.apiVersion, kind: res.kind, name: res.metadata?.name };
  const pkg = PACKAGES[group];
  const file = pkg && join(modules, "@kubernetes-models", pkg, group, version, `${res.kind}.js`);
  if (!file || !existsSync(file)) {
    results.push({ ...entry, status: "no-schema" });
    continue;
  }
  const mod = await import(pathToFileURL(file).href);
  const Model = mod[res.kind];
  try {
    new Model(res).validate();
    results.push({ ...entry, status: "valid" });
  } catch (err) {
    results.push({ ...entry, status: "invalid", error: String(err.message ?? err) });
  }
}
process.stdout.write(JSON.stringify(results, null, 1) + "\n");
