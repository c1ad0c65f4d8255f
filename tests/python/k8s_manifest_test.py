#!/usr/bin/python3
"""examples/kubernetes/jobset.yaml (a PersistentVolumeClaim, two NetworkPolicies, a JobSet),
checked three ways, and elastic-workers.yaml (how its objects name each other, that every
flag it passes exists, and that its pool is gone once its trainer is; check_elastic):

1. Against the schema fields it uses (k8s_schema.py: JobSet v1alpha2, batch/v1 Job with
   its podFailurePolicy, core/v1 Pod and PersistentVolumeClaim, networking.k8s.io/v1
   NetworkPolicy): every field known, of the right type, with allowed values; unknown
   fields fail, as `kubectl apply --validate=strict` would.
2. As Kubernetes would run it (k8s_rules.py): a podFailurePolicy on restartPolicy Never,
   exit codes that docs/configuration.md ("Exit codes") documents, and what follows each
   of them, the Job's rules then the JobSet's: 2, 3, 4 fail the JobSet, 75 and an eviction
   restart it without counting (the trainer; a worker gets a new pod), the rest restart it
   within maxRestarts; an activeDeadlineSeconds on every Job, past which the JobSet fails
   (not restarts); terminationGracePeriodSeconds longer than --stop-grace (trainer) and
   --term-grace (workers); --sagemaker-root on a claim the file declares; NetworkPolicies
   that let the trainer pods reach the workers' port and each other on every port (Gloo's
   and NCCL's are ephemeral), the workers reach no trainer, and no other pod in; the Secret the
   header comment creates; non-root, read-only containers with a writable /tmp; CPU pods
   off GPU nodes; a gRPC readiness probe on the workers' port. Mutated copies of the
   manifest must fail these checks, so the checker is shown to catch each mistake.
3. As tandem sees it: for every pod the JobSet makes, the environment Kubernetes would
   give it (its JobSet labels through the downward API, JOB_COMPLETION_INDEX) is built and
   `tandem launch --role-only` runs with it and the pod's own args, and `tandem inspect`
   with those it shares: each pod must get the role of its replicated job and the trainer
   must list every worker pod's DNS name.

    /usr/bin/python3 tests/python/k8s_manifest_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when PyYAML is missing."""
import copy
import json
import os
import re
import subprocess

import k8s_rules as rules
from k8s_schema import check_documents
from workers import parse_args, require

ARGS = parse_args()
require("yaml")
import yaml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "examples", "kubernetes", "jobset.yaml")
ELASTIC = os.path.join(ROOT, "examples", "kubernetes", "elastic-workers.yaml")
CONFIGURATION = os.path.join(ROOT, "docs", "configuration.md")


def load(path):
    with open(path) as f:
        text = f.read()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    return list(yaml.safe_load_all(text)), header


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def groups_problems(jobset, env):
    """TANDEM_JOBSET_GROUPS: the replicated jobs in the spec's order, names only."""
    value = next((v["value"] for v in env if v["name"] == "TANDEM_JOBSET_GROUPS"), "")
    names = [rj["name"] for rj in jobset["spec"]["replicatedJobs"]]
    entries = value.split(",")
    problems = [] if [e.split("=")[0] for e in entries] == names else \
        [f"TANDEM_JOBSET_GROUPS {value!r} does not list the replicated jobs {names} in the spec's order"]
    if any("=" in e for e in entries):
        problems.append(f"TANDEM_JOBSET_GROUPS {value!r} repeats the spec's replica counts: write the names only")
    return problems


def manifest_problems(docs, header, configuration_md):
    jobsets = of_kind(docs, "JobSet")
    assert len(jobsets) == 1, f"one JobSet per file, not {len(jobsets)}"
    jobset = jobsets[0]
    spec, name = jobset["spec"], jobset["metadata"]["name"]
    names = [rj["name"] for rj in spec["replicatedJobs"]]
    problems = [f"successPolicy names {t!r}, not a replicated job ({names})"
                for t in spec["successPolicy"].get("targetReplicatedJobs", []) if t not in names]
    problems += [f"{rj['name']}: pods need completionMode Indexed for JOB_COMPLETION_INDEX and stable names"
                 for rj in spec["replicatedJobs"] if rj["template"]["spec"].get("completionMode") != "Indexed"]
    containers = [c for rj in spec["replicatedJobs"] for c in rj["template"]["spec"]["template"]["spec"]["containers"]]
    trainer_group = rules.arg(containers[0]["args"], "--trainer-group")
    problems += groups_problems(jobset, containers[0].get("env", []))
    documented = rules.exit_codes(configuration_md)
    for code, again in documented.items():  # the docs' "run it again?" column, where there is one
        if again is not None and code in rules.CANNOT_HELP and not again.lower().startswith("no"):
            problems.append(f"exit {code} fails the JobSet, but docs/configuration.md says of it: {again}")
    problems += rules.pod_failure_policy_problems(jobset, documented)
    problems += rules.failure_problems(jobset, trainer_group, documented)
    if spec.get("failurePolicy", {}).get("restartStrategy") != "BlockingRecreate":
        problems.append("failurePolicy.restartStrategy is not BlockingRecreate: a restarted trainer could open the "
                        "claim, or reach a worker, of the attempt before")
    problems += rules.grace_problems(jobset, trainer_group, rules.flag_default(configuration_md, "--stop-grace"),
                                     rules.flag_default(configuration_md, "--term-grace"))
    problems += rules.deadline_problems(jobset, trainer_group)
    worker_ports = {p["containerPort"] for rj in spec["replicatedJobs"] if rj["name"] != trainer_group
                    for c in rj["template"]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    # As if the trainer had two pods: the policies must let them meet whatever the count.
    two_trainers = copy.deepcopy(jobset)
    for rj in two_trainers["spec"]["replicatedJobs"]:
        if rj["name"] == trainer_group:
            rj["replicas"] = max(2, rj.get("replicas", 1))
    problems += rules.jobset_network_problems(of_kind(docs, "NetworkPolicy"), list(rules.jobset_pods(two_trainers)),
                                              trainer_group, worker_ports)
    problems += rules.secret_problems(header, containers, name)
    claims = {d["metadata"]["name"]: d for d in of_kind(docs, "PersistentVolumeClaim")}
    problems += rules.storage_problems(claims, jobset, trainer_group)
    for rj in spec["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        problems += rules.security_problems(rj["name"], pod)
        wants_gpu = any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in pod["containers"])
        problems += rules.placement_problems(rj["name"], pod, wants_gpu)
        if rj["name"] != trainer_group:
            problems += rules.probe_problems(rj["name"], pod["containers"][0])
    return problems


# ---- tandem inspect in every pod's environment ---------------------------------------

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


def for_inspect(args):
    """`args` less the flags only `tandem launch` takes (--stop-grace ...), with their values."""
    help_text = subprocess.run([ARGS.tandem, "inspect", "--help"], capture_output=True, text=True, timeout=60).stdout
    kept, skip = [], False
    for a in args:
        if skip and not a.startswith("--"):
            skip = False
            continue
        skip = a.startswith("--") and re.search(re.escape(a) + r"\b", help_text) is None
        if not skip:
            kept.append(a)
    return kept


def check_inspect(jobset):
    """`tandem launch --role-only` with each pod's own command line, and `tandem inspect`
    with the flags it shares, in each pod's environment."""
    spec = jobset["spec"]
    all_pods = list(rules.jobset_pods(jobset))
    subdomain = spec.get("network", {}).get("subdomain", jobset["metadata"]["name"])
    workers = sorted(f"{p['host']}.{subdomain}:6000" for p in all_pods if p["group"] == "workers")
    roles = {}
    for pod in all_pods:
        host, container = pod["host"], pod["spec"]["containers"][0]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SLURM", "TANDEM_"))}
        env.pop("WORLD_SIZE", None)
        env.update(container_env(container, pod["labels"], pod["index"]))
        args = container["args"]
        assert args[0] == "launch", f"{host}: the entry point is `tandem launch`, not {args[0]!r}"
        env["TANDEM_SAGEMAKER_ROOT"] = "/nonexistent"  # no resourceconfig.json here: args may name their own
        r = subprocess.run([ARGS.tandem, "launch", "--role-only", *args[1:]], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, f"{host}: tandem launch --role-only exited {r.returncode}:\n{r.stderr}{r.stdout}"
        role = json.loads(r.stdout)
        r = subprocess.run([ARGS.tandem, "inspect", *for_inspect(args[1:])], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, f"{host}: tandem inspect exited {r.returncode}:\n{r.stderr}{r.stdout}"
        out = json.loads(r.stdout)
        assert out["current_host"] == role["host"] == f"{host}.{subdomain}", (out["current_host"], role["host"])
        roles[host] = out["role"]
        assert role["role"] == out["role"], (role, out)
        if out["role"] == "trainer":
            assert out["workers"] == role["workers"] == workers, (out["workers"], role["workers"], workers)
        else:
            assert out["worker_address"] == f"{host}.{subdomain}:6000", out
    expected = {p["host"]: ("trainer" if p["group"] == "trainer" else "worker") for p in all_pods}
    assert roles == expected, (roles, expected)
    return roles


# ---- The checker catches mistakes ----------------------------------------------------------

def pod_of(docs, group):
    rj = next(rj for rj in of_kind(docs, "JobSet")[0]["spec"]["replicatedJobs"] if rj["name"] == group)
    return rj["template"]["spec"]


def set_env(docs, name, value):
    env = pod_of(docs, "workers")["template"]["spec"]["containers"][0]["env"]
    next(v for v in env if v["name"] == name)["value"] = value


MUTATIONS = [  # (what is broken, how, a problem it must cause)
    ("restartPolicy OnFailure with a podFailurePolicy",
     lambda d: pod_of(d, "trainer")["template"]["spec"].update(restartPolicy="OnFailure"), "requires restartPolicy Never"),
    ("exit 75 ignored by the trainer's Job",
     lambda d: pod_of(d, "trainer")["podFailurePolicy"]["rules"][1].update(action="Ignore"),
     "exit 75 leads to 'new pod, not counted', not 'RestartJobSetAndIgnoreMaxRestarts'"),
    ("no JobSet rules", lambda d: of_kind(d, "JobSet")[0]["spec"]["failurePolicy"].pop("rules"),
     "exit 3 leads to 'RestartJobSet', not 'FailJobSet'"),
    ("no restarts", lambda d: of_kind(d, "JobSet")[0]["spec"]["failurePolicy"].update(maxRestarts=0), "maxRestarts is 0"),
    ("an undocumented exit code",
     lambda d: pod_of(d, "workers")["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"].append(42),
     "exit code 42 is not one tandem documents"),
    ("a grace no longer than --stop-grace",
     lambda d: pod_of(d, "trainer")["template"]["spec"].update(terminationGracePeriodSeconds=60), "--stop-grace 60"),
    ("the default grace on the workers",
     lambda d: pod_of(d, "workers")["template"]["spec"].pop("terminationGracePeriodSeconds"), "--term-grace 30"),
    ("a NetworkPolicy open to every pod",
     lambda d: of_kind(d, "NetworkPolicy")[0]["spec"]["ingress"][0]["from"][0].update(podSelector={}),
     "a trainer pod of another JobSet reaches pod tandem-demo-workers-0-0 on port 6000"),
    ("the workers' port open to the workers",
     lambda d: of_kind(d, "NetworkPolicy")[0]["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"].pop(
         "jobset.sigs.k8s.io/replicatedjob-name"), "reaches pod tandem-demo-trainer-0-0 on port 6000"),
    ("a policy open to every namespace",
     lambda d: of_kind(d, "NetworkPolicy")[1]["spec"]["ingress"][0]["from"][0].update(namespaceSelector={}),
     "in another namespace reaches pod tandem-demo-trainer-0-0"),
    ("no policy between the trainer pods",
     lambda d: d.remove(of_kind(d, "NetworkPolicy")[1]),
     "pod tandem-demo-trainer-0-0 cannot reach pod tandem-demo-trainer-1-0 on port 45321"),
    ("the trainer pods meeting on listed ports only (c10d's, not Gloo's or NCCL's)",
     lambda d: of_kind(d, "NetworkPolicy")[1]["spec"]["ingress"][0].update(
         ports=[{"protocol": "TCP", "port": 29500}, {"protocol": "TCP", "port": 29501}]),
     "cannot reach pod tandem-demo-trainer-1-0 on port 32768"),
    ("no NetworkPolicy", lambda d: [d.remove(np) for np in of_kind(d, "NetworkPolicy")], "no NetworkPolicy"),
    ("no deadline on the trainer", lambda d: pod_of(d, "trainer").pop("activeDeadlineSeconds"),
     "trainer: no activeDeadlineSeconds"),
    ("workers out of time before the trainer",
     lambda d: pod_of(d, "workers").update(activeDeadlineSeconds=600), "ends the workers before the trainer's"),
    ("a deadline that restarts the JobSet",
     lambda d: of_kind(d, "JobSet")[0]["spec"]["failurePolicy"]["rules"].pop(1),
     "(DeadlineExceeded) leads to 'RestartJobSet'"),
    ("a shared Secret name",
     lambda d: next(v for v in pod_of(d, "workers")["template"]["spec"]["containers"][0]["env"]
                    if "valueFrom" in v and "secretKeyRef" in v["valueFrom"])["valueFrom"]["secretKeyRef"].update(
                        name="tandem-token"), "reads Secret tandem-token/token"),
    ("an undeclared claim",
     lambda d: pod_of(d, "trainer")["template"]["spec"]["volumes"][0]["persistentVolumeClaim"].update(claimName="x"),
     "claim 'x' is not declared"),
    ("the root on an emptyDir",
     lambda d: pod_of(d, "trainer")["template"]["spec"]["volumes"].__setitem__(0, {"name": "work", "emptyDir": {}}),
     "is not on a PersistentVolumeClaim"),
    ("two trainer pods on a ReadWriteOnce claim",
     lambda d: pod_of(d, "trainer").update(parallelism=2, completions=2), "needs ReadWriteMany"),
    ("root", lambda d: pod_of(d, "workers")["template"]["spec"]["securityContext"].pop("runAsNonRoot"), "runs as root"),
    ("no /tmp", lambda d: pod_of(d, "workers")["template"]["spec"]["containers"][0]["volumeMounts"].clear(),
     "needs an emptyDir on /tmp"),
    ("workers tolerating GPU nodes",
     lambda d: pod_of(d, "workers")["template"]["spec"].update(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
     "CPU pods would take GPU nodes"),
    ("a probe on another port",
     lambda d: pod_of(d, "workers")["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"].update(port=6001),
     "the readinessProbe asks"),
    ("counts written twice", lambda d: set_env(d, "TANDEM_JOBSET_GROUPS", "workers=2,trainer=1"), "repeats the spec"),
    ("groups out of order", lambda d: set_env(d, "TANDEM_JOBSET_GROUPS", "trainer,workers"), "in the spec's order"),
]


def check_mutations(docs, header, configuration_md):
    bad = copy.deepcopy(docs)
    jobset = of_kind(bad, "JobSet")[0]
    jobset["spec"]["replicatedJobs"][0]["replica"] = 2
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = "1"
    of_kind(bad, "PersistentVolumeClaim")[0]["spec"]["accessMode"] = ["ReadWriteOnce"]
    errors = check_documents(bad)
    assert len(errors) == 3 and "unknown field 'accessMode'" in errors[0] and "unknown field 'replica'" in errors[1] \
        and "expected int" in errors[2], errors
    for what, mutate, expected in MUTATIONS:
        bad = copy.deepcopy(docs)
        mutate(bad)
        problems = manifest_problems(bad, header, configuration_md)
        assert any(expected in p for p in problems), f"{what}: no problem says {expected!r}: {problems}"
    bad = header.replace("tandem-demo-token", "tandem-token")
    problems = manifest_problems(docs, bad, configuration_md)
    assert any("one name per namespace" in p for p in problems), problems


def main():
    docs, header = load(MANIFEST)
    with open(CONFIGURATION) as f:
        configuration_md = f.read()
    errors = check_documents(docs)
    assert not errors, "schema:\n  " + "\n  ".join(errors)
    problems = manifest_problems(docs, header, configuration_md)
    assert not problems, "manifest:\n  " + "\n  ".join(problems)
    check_mutations(docs, header, configuration_md)
    print(f"OK: {len(docs)} objects; the checks catch {len(MUTATIONS) + 2} kinds of mistake")
    roles = check_inspect(of_kind(docs, "JobSet")[0])
    print(f"OK: {len(roles)} pods, roles {roles}")
    check_elastic(configuration_md)


def flags_of(args):
    return [a for a in args if a.startswith("--")]


def arg_after(args, flag):
    return args[args.index(flag) + 1]


def first(docs, kind, name=None):
    return next(d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"]))


def elastic_problems(listed, header, configuration_md, help_of):
    """examples/kubernetes/elastic-workers.yaml: the objects name each other rightly, every
    flag they pass is one `tandem <command>` has (help_of(command): its --help), the
    trainer's Job (exit codes, its root on the claim, a deadline) and both pods (Secret,
    security, placement) as in jobset.yaml; the pool is sized by the trainer's
    tandem_workers_wanted and scaled to zero once the trainer's Job has ended; the
    NetworkPolicies let the trainer reach the data port and Prometheus the metrics, and
    nothing else in."""
    kinds = {d["kind"] for d in listed}
    wanted = {"Service", "Deployment", "Job", "PersistentVolumeClaim", "ScaledObject", "NetworkPolicy"}
    if wanted - kinds:
        return [f"the file has no {k}" for k in sorted(wanted - kinds)]
    # A HorizontalPodAutoscaler is named by pool_lifetime_problems.
    problems = [f"the file holds a {k}, which this check does not know" for k in
                sorted(kinds - wanted - {"HorizontalPodAutoscaler"})]
    service, workers, trainer, claim, scaled = (
        first(listed, k) for k in ("Service", "Deployment", "Job", "PersistentVolumeClaim", "ScaledObject"))
    if service["spec"].get("clusterIP") != "None":
        problems.append("the workers' Service must be headless: one address per pod")
    pod = workers["spec"]["template"]
    if not service["spec"]["selector"].items() <= pod["metadata"]["labels"].items():
        problems.append("the Service selects no worker")
    w_container, t_pod = pod["spec"]["containers"][0], trainer["spec"]["template"]["spec"]
    w_args, t_args = w_container["args"], t_pod["containers"][0]["args"]
    for command, args in (("worker", w_args), ("trainer", t_args)):
        if args[0] != command:
            problems.append(f"{args[0]!r} where `tandem {command}` belongs")
        problems += [f"`tandem {command}` has no {flag}" for flag in flags_of(args) if flag not in help_of(command)]
    if "--drain" not in w_args:
        problems.append("the workers lack --drain: a scale-in must drain, not cut off")
    grace = float(arg_after(w_args, "--term-grace")) if "--term-grace" in w_args else \
        rules.flag_default(configuration_md, "--term-grace")
    if pod["spec"].get("terminationGracePeriodSeconds", 30) <= grace:
        problems.append("the kubelet's SIGKILL would cut the workers' drain short")
    name, port = arg_after(t_args, "--worker-service").split(":")
    if name != service["metadata"]["name"] or int(port) != service["spec"]["ports"][0]["port"]:
        problems.append(f"--worker-service {name}:{port} is not the Service {service['metadata']['name']}")
    if arg_after(w_args, "--job-name") != arg_after(t_args, "--job-name"):
        problems.append("--job-name differs: workers refuse another job's trainer")
    metrics_port = int(arg_after(t_args, "--metrics-port"))
    for who, args, template in (("trainer", t_args, trainer["spec"]["template"]), ("workers", w_args, pod)):
        annotations = template.get("metadata", {}).get("annotations", {})
        if "--metrics-port" in args and annotations.get("prometheus.io/port") != arg_after(args, "--metrics-port"):
            problems.append(f"{who}: Prometheus scrapes another port than --metrics-port")
    # The trainer alone is replaced (the Deployment restarts the workers it released):
    # 2, 3, 4 fail the Job, 75 and an eviction get a new pod that resumes, others count.
    problems += rules.secret_problems(header, [w_container, t_pod["containers"][0]], arg_after(t_args, "--job-name"))
    problems += rules.security_problems("workers", pod["spec"]) + rules.security_problems("trainer", t_pod)
    as_jobset = {"spec": {"replicatedJobs": [{"name": "trainer", "template": trainer}]}}
    problems += rules.storage_problems({claim["metadata"]["name"]: claim}, as_jobset, "trainer")
    documented = rules.exit_codes(configuration_md)
    problems += rules.pod_failure_policy_problems(as_jobset, documented)
    events = {**{c: ((), "FailJob" if c in rules.CANNOT_HELP else "Ignore" if c in rules.RESUMES else "Count")
                 for c in set(documented) - {0}}, "evicted": (((rules.DISRUPTION, "True"),), "Ignore")}
    for code, (conditions, want) in events.items():
        got = rules.pod_rule(trainer["spec"], 137 if code == "evicted" else code, set(conditions))[0]
        if got != want:
            problems.append(f"the trainer's Job: exit {code} matches {got}, not {want}")
    if t_pod.get("terminationGracePeriodSeconds", 30) <= 30:
        problems.append("the trainer's terminationGracePeriodSeconds leaves no time for its checkpoint")
    problems += rules.placement_problems("workers", pod["spec"], False)
    problems += rules.placement_problems("trainer", t_pod, True)
    # The pool's lifetime: KEDA, on the trainer's pods and its tandem_workers_wanted.
    idle = float(arg_after(w_args, "--idle-timeout")) if "--idle-timeout" in w_args else \
        rules.flag_default(configuration_md, "--idle-timeout")
    problems += rules.pool_lifetime_problems(scaled, workers, trainer, of_kind(listed, "HorizontalPodAutoscaler"), idle)
    # Who reaches what.
    named = {p["name"]: p["containerPort"] for p in w_container.get("ports", []) if "name" in p}
    worker = rules.endpoint("a worker pod", pod["metadata"]["labels"], ports=named)
    t_labels = trainer["spec"]["template"].get("metadata", {}).get("labels", {})
    trainer_pod = rules.endpoint("the trainer pod", t_labels,
                                 ports={p["name"]: p["containerPort"] for p in t_pod["containers"][0].get("ports", [])
                                        if "name" in p})
    problems += rules.elastic_network_problems(of_kind(listed, "NetworkPolicy"), worker, trainer_pod,
                                               service["spec"]["ports"][0]["targetPort"], metrics_port)
    return problems


def scaled(d):
    return first(d, "ScaledObject")["spec"]


def trigger(d, kind):
    return next(t for t in scaled(d)["triggers"] if t["type"] == kind)


def policy(d, name):
    return first(d, "NetworkPolicy", name)["spec"]


ELASTIC_MUTATIONS = [  # (what is broken, how, a problem it must cause)
    ("a pool that keeps a worker", lambda d: scaled(d).update(minReplicaCount=1), "the pool never scales to zero"),
    ("an idle count above zero", lambda d: scaled(d).update(idleReplicaCount=2, minReplicaCount=3),
     "the pool never scales to zero"),
    ("a plain HPA beside KEDA",
     lambda d: d.append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
                         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "tandem-workers"}}}),
     "two autoscalers fight"),
    ("a fixed count on the Deployment", lambda d: first(d, "Deployment")["spec"].update(replicas=2), "resets"),
    ("no trigger on the trainer's pods",
     lambda d: scaled(d)["triggers"].remove(trigger(d, "kubernetes-workload")), "nothing keeps a worker"),
    ("a set-based podSelector (which this check cannot read)",
     lambda d: trigger(d, "kubernetes-workload")["metadata"].update(
         podSelector="app in (tandem-trainer, tandem-workers)"),
     "write it as key=value"),
    ("a workload trigger on every pod of the app",
     lambda d: [first(d, "Job")["spec"]["template"]["metadata"]["labels"].update(tier="tandem"),
                first(d, "Deployment")["spec"]["template"]["metadata"]["labels"].update(tier="tandem"),
                trigger(d, "kubernetes-workload")["metadata"].update(podSelector="tier=tandem")],
     "counts the workers too"),
    ("a trainer the trigger does not select",
     lambda d: first(d, "Job")["spec"]["template"]["metadata"]["labels"].update(app="trainer"),
     "selects no trainer pod"),
    ("a CPU trigger", lambda d: scaled(d)["triggers"].append({"type": "cpu", "metricType": "Utilization",
                                                               "metadata": {"value": "60"}}),
     "a cpu trigger: it does not read 0"),
    ("every trainer's metric",
     lambda d: trigger(d, "prometheus")["metadata"].update(query="max(tandem_workers_wanted)"),
     "reads every trainer Prometheus scrapes"),
    ("an error for an empty answer", lambda d: trigger(d, "prometheus")["metadata"].update(ignoreNullValues="false"),
     "ignoreNullValues false"),
    ("two workers per wanted one", lambda d: trigger(d, "prometheus")["metadata"].update(threshold="0.5"),
     "is not AverageValue 1"),
    ("a cooldown past --idle-timeout", lambda d: scaled(d).update(cooldownPeriod=900), "--idle-timeout 600"),
    ("no deadline on the trainer", lambda d: first(d, "Job")["spec"].pop("activeDeadlineSeconds"),
     "the trainer's Job has no activeDeadlineSeconds"),
    ("workers allowed on GPU nodes", lambda d: first(d, "Deployment")["spec"]["template"]["spec"].pop("affinity"),
     "workers: nothing keeps these CPU pods off GPU nodes"),
    ("no policy on the workers", lambda d: d.remove(first(d, "NetworkPolicy", "tandem-workers")),
     "no NetworkPolicy selects pod a worker pod"),
    ("no policy on the trainer", lambda d: d.remove(first(d, "NetworkPolicy", "tandem-trainer")),
     "no NetworkPolicy selects pod the trainer pod"),
    ("metrics open to the namespace",
     lambda d: policy(d, "tandem-workers")["ingress"][1].pop("from"),
     "a pod without labels reaches a worker pod on port 9400"),
    ("Prometheus known by its label alone",
     lambda d: policy(d, "tandem-trainer")["ingress"][0]["from"][0].update(namespaceSelector={}),
     "a pod labelled as Prometheus in another namespace reaches the trainer pod on port 9400"),
    ("Prometheus on the data port", lambda d: policy(d, "tandem-workers")["ingress"][1].pop("ports"),
     "Prometheus reaches a worker pod on port 6000"),
    ("the data port shut to the trainer",
     lambda d: policy(d, "tandem-workers")["ingress"][0]["ports"][0].update(port=6001),
     "the trainer pod cannot reach a worker pod on port 6000"),
    ("the trainer's metrics shut to Prometheus",
     lambda d: policy(d, "tandem-trainer")["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"].update(
         {"kubernetes.io/metadata.name": "prometheus"}), "Prometheus cannot reach the trainer pod on port 9400"),
]


def check_elastic(configuration_md):
    listed, header = load(ELASTIC)
    errors = check_documents(listed)
    assert not errors, "elastic-workers.yaml, schema:\n  " + "\n  ".join(errors)
    helps = {}

    def help_of(command):
        if command not in helps:
            helps[command] = subprocess.run([ARGS.tandem, command, "--help"], capture_output=True, text=True,
                                            timeout=60).stdout
        return helps[command]

    problems = elastic_problems(listed, header, configuration_md, help_of)
    assert not problems, "elastic-workers.yaml:\n  " + "\n  ".join(problems)
    for what, mutate, expected in ELASTIC_MUTATIONS:
        bad = copy.deepcopy(listed)
        mutate(bad)
        problems = elastic_problems(bad, header, configuration_md, help_of)
        assert any(expected in p for p in problems), f"elastic, {what}: no problem says {expected!r}: {problems}"
    print(f"OK: elastic-workers.yaml; the checks catch {len(ELASTIC_MUTATIONS)} kinds of mistake")


if __name__ == "__main__":
    main()
