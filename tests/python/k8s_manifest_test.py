#!/usr/bin/python3
"""examples/kubernetes/jobset.yaml, checked two ways (and elastic-workers.yaml: how its
objects name each other, and that every flag it passes exists; check_elastic):

1. Against the schema fields it uses: JobSet v1alpha2 (kubernetes-sigs/jobset v0.12.0,
   api/jobset/v1alpha2/jobset_types.go: json tags, enums, required fields) and batch/v1 Job / core/v1 Pod (the Kubernetes
   API reference). Every field must be known, of the right type, with allowed values;
   unknown fields fail, as `kubectl apply --validate=strict` would.
2. As tandem sees it: for every pod the JobSet makes, the environment Kubernetes would
   give it (labels through the downward API, JOB_COMPLETION_INDEX) is built and
   `tandem inspect` runs with it and the pod's own args: each pod must get the role of
   its replicated job and the trainer must list every worker pod's DNS name.

    /usr/bin/python3 tests/python/k8s_manifest_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when PyYAML is missing."""
import json
import os
import subprocess

from workers import parse_args, require

ARGS = parse_args()
require("yaml")
import yaml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "examples", "kubernetes", "jobset.yaml")
ELASTIC = os.path.join(ROOT, "examples", "kubernetes", "elastic-workers.yaml")

# ---- The schema subset ---------------------------------------------------------------
# A type is str, int, bool, a set of allowed strings, a list [type], a dict of fields
# (required ones marked with a trailing "!"), or "quantity" (a Kubernetes quantity).
QUANTITY = "quantity"
ENV_VAR = {
    "name!": str,
    "value": str,
    "valueFrom": {
        "fieldRef": {"fieldPath!": str, "apiVersion": str},
        "secretKeyRef": {"name!": str, "key!": str, "optional": bool},
        "configMapKeyRef": {"name!": str, "key!": str, "optional": bool},
    },
}
CONTAINER = {
    "name!": str, "image!": str, "command": [str], "args": [str], "workingDir": str,
    "ports": [{"containerPort!": int, "name": str, "protocol": {"TCP", "UDP", "SCTP"}}],
    "env": [ENV_VAR],
    "resources": {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}},
    "volumeMounts": [{"name!": str, "mountPath!": str, "readOnly": bool}],
}
POD_SPEC = {
    "restartPolicy": {"OnFailure", "Never"},  # Jobs refuse Always
    "containers!": [CONTAINER],
    "volumes": [{"name!": str, "emptyDir": {"medium": str, "sizeLimit": QUANTITY},
                 "persistentVolumeClaim": {"claimName!": str, "readOnly": bool},
                 "secret": {"secretName!": str}}],
    "nodeSelector": {"*": str},
    "serviceAccountName": str,
}
JOB_SPEC = {
    "completionMode": {"NonIndexed", "Indexed"},
    "parallelism": int, "completions": int, "backoffLimit": int, "activeDeadlineSeconds": int,
    "template!": {"metadata": {"labels": {"*": str}, "annotations": {"*": str}}, "spec!": POD_SPEC},
}
JOBSET = {
    "apiVersion!": {"jobset.x-k8s.io/v1alpha2"},
    "kind!": {"JobSet"},
    "metadata!": {"name!": str, "namespace": str, "labels": {"*": str}},
    "spec!": {
        "network": {"enableDNSHostnames": bool, "subdomain": str, "publishNotReadyAddresses": bool},
        "successPolicy": {"operator!": {"All", "Any"}, "targetReplicatedJobs": [str]},
        "failurePolicy": {"maxRestarts": int, "restartStrategy": {"Recreate", "BlockingRecreate", "InPlaceRestart"}},
        "startupPolicy": {"startupPolicyOrder!": {"AnyOrder", "InOrder"}},
        "suspend": bool,
        "replicatedJobs!": [{"name!": str, "replicas": int,
                             "template!": {"metadata": {"labels": {"*": str}}, "spec!": JOB_SPEC}}],
    },
}


def is_quantity(v):
    if isinstance(v, int) and not isinstance(v, bool):
        return True
    if not isinstance(v, str) or not v:
        return False
    for suffix in ("Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G", "T", ""):
        if v.endswith(suffix):
            number = v[: len(v) - len(suffix)] if suffix else v
            try:
                return float(number) >= 0
            except ValueError:
                continue
    return False


def check(value, schema, where, errors):
    if schema is str or schema is int or schema is bool:
        ok = isinstance(value, schema) and not (schema is int and isinstance(value, bool))
        if not ok:
            errors.append(f"{where}: expected {schema.__name__}, got {type(value).__name__} {value!r}")
    elif schema == QUANTITY:
        if not is_quantity(value):
            errors.append(f"{where}: {value!r} is not a Kubernetes quantity")
    elif isinstance(schema, set):
        if value not in schema:
            errors.append(f"{where}: {value!r} is not one of {sorted(schema)}")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            errors.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]", errors)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            errors.append(f"{where}: expected an object, got {type(value).__name__}")
            return
        fields = {k.rstrip("!"): s for k, s in schema.items()}
        for k in schema:
            if k.endswith("!") and k[:-1] not in value:
                errors.append(f"{where}: required field {k[:-1]!r} is missing")
        for k, v in value.items():
            if k in fields:
                check(v, fields[k], f"{where}.{k}", errors)
            elif "*" in fields:
                check(v, fields["*"], f"{where}.{k}", errors)
            else:
                errors.append(f"{where}: unknown field {k!r}")
    else:
        raise AssertionError(f"bad schema at {where}")


# ---- The pods, as the JobSet controller would make them -------------------------------

def pods(jobset):
    name = jobset["metadata"]["name"]
    for rj in jobset["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        for j in range(rj.get("replicas", 1)):
            for p in range(job.get("parallelism", 1)):
                labels = {"jobset.sigs.k8s.io/jobset-name": name,
                          "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                          "jobset.sigs.k8s.io/replicatedjob-replicas": str(rj.get("replicas", 1)),
                          "jobset.sigs.k8s.io/job-index": str(j)}
                yield rj["name"], f"{name}-{rj['name']}-{j}-{p}", labels, p, job["template"]["spec"]


def container_env(container, labels, completion_index):
    env = {"JOB_COMPLETION_INDEX": str(completion_index), "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            prefix = "metadata.labels['"
            assert path.startswith(prefix) and path.endswith("']"), f"{var['name']}: unsupported fieldPath {path}"
            key = path[len(prefix):-2]
            assert key in labels, f"{var['name']}: JobSet sets no pod label {key!r} (it sets {sorted(labels)})"
            env[var["name"]] = labels[key]
        elif "secretKeyRef" in source:
            env[var["name"]] = "token-from-" + source["secretKeyRef"]["name"]
    return env


def main():
    with open(MANIFEST) as f:
        jobset = yaml.safe_load(f)
    errors = []
    check(jobset, JOBSET, "jobset", errors)
    assert not errors, "schema:\n  " + "\n  ".join(errors)

    spec = jobset["spec"]
    names = [rj["name"] for rj in spec["replicatedJobs"]]
    for target in spec["successPolicy"].get("targetReplicatedJobs", []):
        assert target in names, f"successPolicy names {target!r}, not a replicated job ({names})"
    for rj in spec["replicatedJobs"]:
        assert rj["template"]["spec"].get("completionMode") == "Indexed", \
            f"{rj['name']}: pods need completionMode Indexed for JOB_COMPLETION_INDEX and stable names"

    all_pods = list(pods(jobset))
    subdomain = spec.get("network", {}).get("subdomain", jobset["metadata"]["name"])
    workers = sorted(f"{host}.{subdomain}:6000" for group, host, *_ in all_pods if group == "workers")
    roles = {}
    for group, host, labels, index, pod in all_pods:
        container = pod["containers"][0]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SLURM", "TANDEM_"))}
        env.pop("WORLD_SIZE", None)
        env.update(container_env(container, labels, index))
        args = container["args"]
        assert args[0] == "launch", f"{host}: the entry point is `tandem launch`, not {args[0]!r}"
        env["TANDEM_SAGEMAKER_ROOT"] = "/nonexistent"  # no resourceconfig.json here: args may name their own
        argv = [ARGS.tandem, "inspect", *args[1:]]
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{host}: tandem inspect exited {r.returncode}:\n{r.stderr}{r.stdout}"
        out = json.loads(r.stdout)
        assert out["current_host"] == f"{host}.{subdomain}", out["current_host"]
        roles[host] = out["role"]
        if out["role"] == "trainer":
            assert out["workers"] == workers, (out["workers"], workers)
        else:
            assert out["worker_address"] == f"{host}.{subdomain}:6000", out
    expected = {host: ("trainer" if group == "trainer" else "worker") for group, host, *_ in all_pods}
    assert roles == expected, (roles, expected)

    # The checker itself must catch mistakes: an unknown field and a wrong type.
    bad = yaml.safe_load(open(MANIFEST))
    bad["spec"]["replicatedJobs"][0]["replica"] = 2
    bad["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = "1"
    errors = []
    check(bad, JOBSET, "jobset", errors)
    assert len(errors) == 2 and "unknown field 'replica'" in errors[0] and "expected int" in errors[1], errors
    print(f"OK: {len(all_pods)} pods, roles {roles}")
    check_elastic()


def flags_of(args):
    return [a for a in args if a.startswith("--")]


def arg_after(args, flag):
    return args[args.index(flag) + 1]


def check_elastic():
    """examples/kubernetes/elastic-workers.yaml: the objects name each other rightly, and
    every flag they pass is one `tandem <command>` has."""
    with open(ELASTIC) as f:
        docs = {d["kind"]: d for d in yaml.safe_load_all(f)}
    assert set(docs) == {"Service", "Deployment", "Job", "HorizontalPodAutoscaler"}, sorted(docs)
    service, workers, trainer, hpa = (docs[k] for k in ("Service", "Deployment", "Job", "HorizontalPodAutoscaler"))
    assert service["spec"]["clusterIP"] == "None", "the workers' Service must be headless: one address per pod"
    pod = workers["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), "the Service selects no worker"
    w_args = pod["spec"]["containers"][0]["args"]
    t_args = trainer["spec"]["template"]["spec"]["containers"][0]["args"]
    for command, args in (("worker", w_args), ("trainer", t_args)):
        assert args[0] == command, args
        help_text = subprocess.run([ARGS.tandem, command, "--help"], capture_output=True, text=True, timeout=60).stdout
        for flag in flags_of(args):
            assert flag in help_text, f"`tandem {command}` has no {flag}"
    assert "--drain" in w_args, "a scale-in must drain, not cut off"
    grace = float(arg_after(w_args, "--term-grace"))
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace, "the kubelet's SIGKILL would cut the drain short"
    name, port = arg_after(t_args, "--worker-service").split(":")
    assert name == service["metadata"]["name"] and int(port) == service["spec"]["ports"][0]["port"], t_args
    assert arg_after(w_args, "--job-name") == arg_after(t_args, "--job-name"), "workers refuse another job's trainer"
    metrics_port = arg_after(t_args, "--metrics-port")
    annotations = trainer["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == metrics_port, "Prometheus scrapes another port than the trainer serves"
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", workers["metadata"]["name"]), ref
    metric = hpa["spec"]["metrics"][0]["external"]
    assert metric["metric"]["name"] == "tandem_workers_wanted", metric
    assert metric["target"] == {"type": "AverageValue", "averageValue": "1"}, \
        "AverageValue 1 makes the replicas the trainer's tandem_workers_wanted"
    print("OK: elastic-workers.yaml")


if __name__ == "__main__":
    main()
