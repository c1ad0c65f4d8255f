"""What Kubernetes, the JobSet controller and KEDA would make of examples/kubernetes/*.yaml,
for tests/python/k8s_manifest_test.py (not a test itself): the pods and their labels, the
fate of a pod that fails (the Job's podFailurePolicy, then the JobSet's failurePolicy
rules) and of a Job past its activeDeadlineSeconds, which connections the NetworkPolicies
let through, when the elastic pool's ScaledObject scales it to zero, and the checks of how
the manifests' objects fit tandem and each other. Each check returns a list of problems,
so that a mutated manifest can be shown to fail."""
import re

# The pod labels the JobSet controller sets (v0.12.0, labelAndAnnotateObject), and the Job's own.
JOBSET_KEY = "jobset.sigs.k8s.io/"
JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", "FailedIndexes",
                       "MaxFailedIndexesExceeded"}
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")  # jobset_types.go, FailurePolicyRule.name
CANNOT_HELP = {2, 3, 4}  # command line, configuration, data: fail the JobSet at once
RESUMES = {75}           # SIGTERM after a checkpoint: restart, not counted
DISRUPTION = "DisruptionTarget"


def jobset_pods(jobset):
    """Every pod the JobSet makes: group, host name, labels, completion index, pod spec."""
    name, rjs = jobset["metadata"]["name"], jobset["spec"]["replicatedJobs"]
    total = sum(rj.get("replicas", 1) for rj in rjs)
    before = 0
    for rj in rjs:
        job, replicas = rj["template"]["spec"], rj.get("replicas", 1)
        for j in range(replicas):
            for p in range(job.get("parallelism", 1)):
                labels = {JOBSET_KEY + k: v for k, v in {
                    "jobset-name": name, "jobset-uid": "0b1c-uid", "replicatedjob-name": rj["name"],
                    "restart-attempt": "0", "replicatedjob-replicas": str(replicas), "global-replicas": str(total),
                    "job-index": str(j), "job-global-index": str(before + j), "job-key": "hash",
                    "group-name": "default", "group-replicas": str(total), "job-group-index": str(before + j)}.items()}
                labels.update({**rj["template"].get("metadata", {}).get("labels", {}),
                               **job["template"].get("metadata", {}).get("labels", {}),
                               "batch.kubernetes.io/job-completion-index": str(p)})
                yield {"group": rj["name"], "host": f"{name}-{rj['name']}-{j}-{p}", "labels": labels, "index": p,
                       "spec": job["template"]["spec"], "job": job}
        before += replicas


def arg(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


# ---- docs/configuration.md -------------------------------------------------------------

def exit_codes(configuration_md):
    """{code: its "run it again?" cell, None in a table of two columns} from the table after
    "Exit codes" in docs/configuration.md."""
    lines = configuration_md.splitlines()
    start = next(i for i, line in enumerate(lines) if "Exit codes" in line)
    rows, seen_table = {}, False
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            if seen_table:
                break
            continue
        seen_table = True
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[int(cells[0])] = cells[2] if len(cells) > 2 else None
    assert rows, "docs/configuration.md: no table of exit codes after 'Exit codes'"
    return rows


def flag_default(configuration_md, flag):
    """The default of `flag` in its settings table row, off SageMaker: the last number."""
    for line in configuration_md.splitlines():
        if line.startswith(f"| `{flag}` |"):
            return float(re.findall(r"\d+", line.split("|")[2])[-1])
    raise AssertionError(f"docs/configuration.md documents no {flag}")


# ---- What happens to a pod that fails ---------------------------------------------------

def pod_rule(job, exit_code, conditions):
    """The Job controller's matchPodFailurePolicy: (action, FailJob message or None)."""
    for index, rule in enumerate(job.get("podFailurePolicy", {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        if codes:
            hit = exit_code != 0 and (exit_code in codes["values"]) == (codes["operator"] == "In")
            message = f"Container {codes.get('containerName', 'tandem')} for pod ns/pod failed with exit code " \
                      f"{exit_code} matching {rule['action']} rule at index {index}"
        else:
            matched = [c["type"] for c in rule.get("onPodConditions", []) if (c["type"], c["status"]) in conditions]
            hit = bool(matched)
            message = f"Pod ns/pod has condition {matched[0] if matched else ''} matching {rule['action']} rule at index {index}"
        if hit:
            return rule["action"], message if rule["action"] == "FailJob" else None
    return "Count", None


def jobset_action(jobset, group, reason, message):
    """The JobSet controller's first matching failurePolicy rule; none: RestartJobSet."""
    for rule in jobset["spec"].get("failurePolicy", {}).get("rules", []):
        if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
            continue
        patterns = rule.get("onJobFailureMessagePatterns")
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if rule.get("targetReplicatedJobs") and group not in rule["targetReplicatedJobs"]:
            continue
        return rule["action"]
    return "RestartJobSet" if jobset["spec"].get("failurePolicy") else "FailJobSet"


def fate(jobset, rj, exit_code, conditions=()):
    """What follows a pod of `rj` ending with `exit_code` (and pod `conditions`)."""
    job = rj["template"]["spec"]
    action, message = pod_rule(job, exit_code, set(conditions))
    if action == "Ignore":
        return "new pod, not counted"
    if action == "FailJob":
        return jobset_action(jobset, rj["name"], "PodFailurePolicy", message)
    if job.get("backoffLimit", 6) > 0:
        return "new pod, counted"
    return jobset_action(jobset, rj["name"], "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def expected_fate(code, trainer, disrupted=False):
    """The policy tandem's exit codes call for. A trainer releases its workers when it ends
    (they exit 0 and their Jobs complete), so it is restarted only with them: by the JobSet."""
    if code in CANNOT_HELP:
        return "FailJobSet"
    if code in RESUMES or disrupted:
        return "RestartJobSetAndIgnoreMaxRestarts" if trainer else "new pod, not counted"
    return "RestartJobSet" if trainer else "new pod, counted"


def failure_problems(jobset, trainer_group, documented):
    problems = []
    policy = jobset["spec"].get("failurePolicy", {})
    if policy.get("maxRestarts", 0) < 1:
        problems.append("failurePolicy.maxRestarts is 0: one trainer failure ends the job with no resume")
    names = [rj["name"] for rj in jobset["spec"]["replicatedJobs"]]
    for rule in policy.get("rules", []):
        if not RULE_NAME.match(rule["name"]):
            problems.append(f"failurePolicy rule name {rule['name']!r} does not match {RULE_NAME.pattern}")
        for reason in set(rule.get("onJobFailureReasons", [])) - JOB_FAILURE_REASONS:
            problems.append(f"failurePolicy rule {rule['name']}: {reason!r} is no Job failure reason")
        for target in set(rule.get("targetReplicatedJobs", [])) - set(names):
            problems.append(f"failurePolicy rule {rule['name']}: {target!r} is not a replicated job ({names})")
    events = [(c, ()) for c in sorted(set(documented) - {0}) + [137]]
    events += [(75, ((DISRUPTION, "True"),)), (137, ((DISRUPTION, "True"),))]
    for rj in jobset["spec"]["replicatedJobs"]:
        trainer = rj["name"] == trainer_group
        for code, conditions in events:
            got = fate(jobset, rj, code, conditions)
            want = expected_fate(code, trainer, bool(conditions))
            if got != want:
                how = f"exit {code}" + (" after an eviction" if conditions else "")
                problems.append(f"{rj['name']}: a pod that ends with {how} leads to {got!r}, not {want!r}")
    return problems


DEADLINE_MESSAGE = "Job was active longer than specified deadline"  # the Job controller's, reason DeadlineExceeded


def deadline_problems(jobset, trainer_group):
    """Every Job of an attempt has activeDeadlineSeconds, the workers' no shorter than the
    trainer's (they would stop feeding it first), and a Job past it fails the JobSet: a
    restart would grant the same time again, so the deadline would bound nothing."""
    problems, rjs = [], jobset["spec"]["replicatedJobs"]
    deadlines = {rj["name"]: rj["template"]["spec"].get("activeDeadlineSeconds") for rj in rjs}
    for name, deadline in deadlines.items():
        if deadline is None:
            problems.append(f"{name}: no activeDeadlineSeconds: a hang tandem's timeouts miss runs (and bills) forever")
        elif deadline <= 0:
            problems.append(f"{name}: activeDeadlineSeconds {deadline} is not positive")
    trainer = deadlines.get(trainer_group)
    for name, deadline in deadlines.items():
        if name != trainer_group and None not in (deadline, trainer) and deadline < trainer:
            problems.append(f"{name}: activeDeadlineSeconds {deadline} ends the workers before the trainer's {trainer}")
    for rj in rjs:
        if deadlines[rj["name"]] is None:
            continue
        got = jobset_action(jobset, rj["name"], "DeadlineExceeded", DEADLINE_MESSAGE)
        if got != "FailJobSet":
            problems.append(f"{rj['name']}: a Job past its activeDeadlineSeconds (DeadlineExceeded) leads to {got!r}, "
                            "not 'FailJobSet': each attempt would get the deadline afresh")
    return problems


def pod_failure_policy_problems(jobset, documented):
    problems = []
    for rj in jobset["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        if "podFailurePolicy" not in job:
            continue
        pod = job["template"]["spec"]
        if pod.get("restartPolicy") != "Never":
            problems.append(f"{rj['name']}: a podFailurePolicy requires restartPolicy Never, not {pod.get('restartPolicy')}")
        containers = {c["name"] for c in pod["containers"]}
        for rule in job["podFailurePolicy"]["rules"]:
            codes = rule.get("onExitCodes")
            if bool(codes) == bool(rule.get("onPodConditions")):
                problems.append(f"{rj['name']}: a podFailurePolicy rule needs onExitCodes or onPodConditions, not both")
            if not codes:
                continue
            if codes.get("containerName", next(iter(containers))) not in containers:
                problems.append(f"{rj['name']}: onExitCodes names container {codes['containerName']!r}, not one of {containers}")
            for v in codes["values"]:
                if v == 0 or v not in documented:
                    problems.append(f"{rj['name']}: exit code {v} is not one tandem documents ({sorted(documented)})")
    return problems


# ---- How the objects fit tandem and each other -------------------------------------------

def grace_problems(jobset, trainer_group, stop_grace, term_grace):
    problems = []
    for rj in jobset["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        trainer = rj["name"] == trainer_group
        flag = "--stop-grace" if trainer else "--term-grace"
        grace = float(arg(args, flag, stop_grace if trainer else term_grace))
        if pod.get("terminationGracePeriodSeconds", 30) <= grace:
            problems.append(f"{rj['name']}: terminationGracePeriodSeconds {pod.get('terminationGracePeriodSeconds', 30)} "
                            f"is not longer than {flag} {grace:g}: the kubelet's SIGKILL cuts the stop short")
    return problems


def selects(selector, labels):
    """A LabelSelector against a pod's labels."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        has, value = e["key"] in labels, labels.get(e["key"])
        ok = {"In": has and value in e.get("values", []), "NotIn": not has or value not in e.get("values", []),
              "Exists": has, "DoesNotExist": not has}[e["operator"]]
        if not ok:
            return False
    return True


# ---- NetworkPolicy: which connections get through --------------------------------------

NAMESPACE = "tandem"  # the namespace the manifests are applied in (they name none)
TRAINER_PORTS = (29500, 29501, 32768, 45321, 60999)  # c10d store, release barrier, Gloo/NCCL's ephemeral range
ANY_PORTS = (22, 80, 6000, 8080, 9400, 29500, 29501, 45321)  # what a stranger must reach on none of


def endpoint(name, labels, namespace=NAMESPACE, ports=None):
    """A pod as a NetworkPolicy sees it: labels, its namespace's labels, named container ports."""
    return {"name": name, "labels": labels, "namespace": {"kubernetes.io/metadata.name": namespace},
            "ports": ports or {}}


def peer_admits(peer, src):
    if "ipBlock" in peer:
        return True  # an address range may hold any pod: counted as letting everyone in
    ns_selector, pod_selector = peer.get("namespaceSelector"), peer.get("podSelector")
    in_ns = selects(ns_selector, src["namespace"]) if ns_selector is not None else \
        src["namespace"]["kubernetes.io/metadata.name"] == NAMESPACE  # a podSelector alone: the policy's namespace
    return in_ns and (pod_selector is None or selects(pod_selector, src["labels"]))


def port_admits(ports, dst, port, protocol="TCP"):
    if not ports:
        return True  # no `ports`: every port and protocol
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        want = p.get("port")
        if want is None:
            return True
        if isinstance(want, str):
            want = dst["ports"].get(want)
            if want is None:
                continue
        if want <= port <= p.get("endPort", want):
            return True
    return False


def isolating(policies, dst):
    return [np for np in policies if "Ingress" in np["spec"].get("policyTypes", ["Ingress"])
            and selects(np["spec"]["podSelector"], dst["labels"])]


def reaches(policies, src, dst, port):
    """Whether a TCP connection from pod `src` to `dst`:`port` is let in: `dst` selected by
    no policy is open; else one ingress rule of one policy selecting it must admit both the
    source (any `from` peer) and the port. (Policies are in `dst`'s namespace, NAMESPACE.)"""
    selecting = isolating(policies, dst)
    if not selecting:
        return True
    return any((not rule.get("from") or any(peer_admits(peer, src) for peer in rule["from"]))
               and port_admits(rule.get("ports"), dst, port)
               for np in selecting for rule in np["spec"].get("ingress", []))


def reach_problems(policies, cases):
    """cases: (source, destination, ports, wanted, why). A problem for each port whose fate
    is not the wanted one; every destination must be isolated for ingress at all."""
    if not policies:
        return ["no NetworkPolicy: any pod in the cluster reaches every port of these pods"]
    problems, seen = [], set()
    for src, dst, ports, want, why in cases:
        if dst["name"] not in seen:
            seen.add(dst["name"])
            if not isolating(policies, dst):
                problems.append(f"no NetworkPolicy selects pod {dst['name']}: anything in the cluster reaches it")
        for port in sorted(set(ports)):
            if reaches(policies, src, dst, port) != want:
                verb = "cannot reach" if want else "reaches"
                problems.append(f"{src['name']} {verb} {dst['name']} on port {port}: {why}")
    return problems


def jobset_network_problems(policies, pods, trainer_group, worker_ports):
    """The trainer pods reach every worker's data port, and each other on every port;
    the workers reach no trainer, and no pod outside the JobSet reaches any of its pods.
    `pods`: jobset_pods() of a JobSet with at least two trainer pods."""
    name = pods[0]["labels"][JOBSET_KEY + "jobset-name"]
    at = {p["host"]: endpoint(f"pod {p['host']}", p["labels"]) for p in pods}
    trainers = [at[p["host"]] for p in pods if p["group"] == trainer_group]
    workers = [at[p["host"]] for p in pods if p["group"] != trainer_group]
    trainer_labels = next(p["labels"] for p in pods if p["group"] == trainer_group)
    strangers = [
        endpoint("a trainer pod of another JobSet", {**trainer_labels, JOBSET_KEY + "jobset-name": "another-jobset"}),
        endpoint("a pod without labels", {}),
        endpoint(f"a pod with {name}'s trainer labels in another namespace", trainer_labels, namespace="elsewhere"),
    ]
    cases = [(t, w, sorted(worker_ports), True, "the trainer pulls its batches there")
             for t in trainers for w in workers]
    cases += [(a, b, TRAINER_PORTS, True, "c10d, the release barrier, Gloo and NCCL connect there (NCCL's and "
               "Gloo's ports are ephemeral: list ports and the first collective hangs until --dist-timeout)")
              for a in trainers for b in trainers if a is not b]
    cases += [(w, t, ANY_PORTS + TRAINER_PORTS, False, "no worker has business with a trainer (they run users' "
               "dataset code)") for w in workers for t in trainers]
    cases += [(s, d, ANY_PORTS + TRAINER_PORTS, False, f"the NetworkPolicies let in pods that are not {name}'s")
              for s in strangers for d in trainers + workers]
    return reach_problems(policies, cases)


def secret_problems(header, containers, jobset_name):
    made = re.search(r"kubectl create secret generic (\S+) --from-literal=([\w.-]+)=", header)
    if not made:
        return ["the header comment has no `kubectl create secret generic NAME --from-literal=KEY=...`"]
    name, key = made.groups()
    problems = [] if name.startswith(jobset_name + "-") else \
        [f"Secret {name}: one name per namespace; derive it from the JobSet's name ({jobset_name}-token)"]
    for c in containers:
        for var in c.get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref and (ref["name"], ref["key"]) != (name, key):
                problems.append(f"{c['name']}: {var['name']} reads Secret {ref['name']}/{ref['key']}, "
                                f"the header creates {name}/{key}")
    return problems


def storage_problems(claims, jobset, trainer_group):
    problems, mounting = [], {}
    for rj in jobset["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        pods = rj.get("replicas", 1) * rj["template"]["spec"].get("parallelism", 1)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for v in volumes.values():
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim is not None:
                mounting[claim] = mounting.get(claim, 0) + pods
                if claim not in claims:
                    problems.append(f"{rj['name']}: claim {claim!r} is not declared in the file ({sorted(claims)})")
        if rj["name"] != trainer_group:
            continue
        c = pod["containers"][0]
        root = arg(c["args"], "--sagemaker-root", "/opt/ml")
        mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == root), None)
        if not mount or "persistentVolumeClaim" not in volumes.get(mount["name"], {}):
            problems.append(f"{rj['name']}: --sagemaker-root {root} is not on a PersistentVolumeClaim: "
                            "checkpoints and model.pt die with the pod")
    for claim, count in mounting.items():
        modes = claims.get(claim, {}).get("spec", {}).get("accessModes", [])
        if count > 1 and "ReadWriteMany" not in modes:
            problems.append(f"claim {claim}: {count} pods mount it, which needs ReadWriteMany, not {modes}")
    return problems


def security_problems(name, pod):
    problems, pod_sc = [], pod.get("securityContext", {})
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in pod["containers"]:
        sc = {**pod_sc, **c.get("securityContext", {})}
        where = f"{name}/{c['name']}"
        if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
            problems.append(f"{where}: runs as root (runAsNonRoot and a runAsUser other than 0, please)")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if not sc.get("readOnlyRootFilesystem"):
            continue
        writable = [m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")]
        if not any(m["mountPath"] == "/tmp" and "emptyDir" in volumes.get(m["name"], {})
                   for m in c.get("volumeMounts", [])):
            problems.append(f"{where}: a read-only root filesystem needs an emptyDir on /tmp")
        home = next((v.get("value") for v in c.get("env", []) if v["name"] == "HOME"), None)
        if home is None or not any(home == w or home.startswith(w + "/") for w in writable):
            problems.append(f"{where}: HOME ({home}) is not on a writable volume: Torch's caches would fail")
    return problems


def placement_problems(name, pod, wants_gpu):
    tolerates = any(t.get("key") == "nvidia.com/gpu" and t.get("effect") in (None, "NoSchedule")
                    for t in pod.get("tolerations", []))
    if wants_gpu:
        return [] if tolerates else [f"{name}: asks for nvidia.com/gpu but does not tolerate the nvidia.com/gpu taint"]
    terms = pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution",
                                                                {}).get("nodeSelectorTerms", [])
    gpu_node = {"nvidia.com/gpu.present": "true"}
    off_gpu = terms and not any(selects({"matchExpressions": t.get("matchExpressions", [])}, gpu_node) for t in terms)
    problems = [] if off_gpu else [f"{name}: nothing keeps these CPU pods off GPU nodes (nvidia.com/gpu.present)"]
    if tolerates:
        problems.append(f"{name}: tolerates the nvidia.com/gpu taint: CPU pods would take GPU nodes")
    return problems


def probe_problems(name, container):
    ports = {p["containerPort"] for p in container.get("ports", [])}
    grpc = container.get("readinessProbe", {}).get("grpc")
    if not grpc:
        return [f"{name}: no gRPC readinessProbe, although workers serve grpc.health.v1"]
    if grpc["port"] not in ports or grpc.get("service", "") != "":
        return [f"{name}: the readinessProbe asks {grpc} of a worker that serves the health service '' on {ports}"]
    return []


# ---- The elastic pool (elastic-workers.yaml) --------------------------------------------

PROMETHEUS = endpoint("Prometheus", {"app.kubernetes.io/name": "prometheus"}, namespace="monitoring")


def elastic_network_problems(policies, worker, trainer, data_port, metrics_port):
    """The trainer reaches the workers' data port; Prometheus (PROMETHEUS: the namespace and
    label the manifest's comments name) reaches both metrics ports and nothing else; the
    workers reach no trainer port; no other pod reaches either. `worker`, `trainer`: endpoints."""
    strangers = [
        endpoint("a pod without labels", {}),
        endpoint("a pod labelled as Prometheus in another namespace", PROMETHEUS["labels"], namespace="elsewhere"),
        endpoint("another pod of the monitoring namespace", {"app.kubernetes.io/name": "grafana"},
                 namespace="monitoring"),
        endpoint("a trainer of another namespace", trainer["labels"], namespace="elsewhere"),
    ]
    ports = ANY_PORTS + (data_port, metrics_port)
    cases = [(trainer, worker, [data_port], True, "the trainer pulls its batches there"),
             (PROMETHEUS, worker, [metrics_port], True, "Prometheus scrapes the workers' metrics"),
             (PROMETHEUS, trainer, [metrics_port], True, "Prometheus scrapes tandem_workers_wanted, the pool's signal"),
             (PROMETHEUS, worker, [data_port], False, "only the trainer dials the data port"),
             (worker, trainer, ports, False, "no worker has business with the trainer (they run users' dataset code)")]
    cases += [(s, d, ports, False, "plain-HTTP metrics and the data port are for Prometheus and the trainer only")
              for s in strangers for d in (worker, trainer)]
    return reach_problems(policies, cases)


def equality_selector(text):
    """A kubectl-style equality selector ('a=b,c!=d') as a LabelSelector; None if set-based."""
    selector = {"matchLabels": {}, "matchExpressions": []}
    for term in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"([\w./-]+)\s*(!=|==|=)\s*([\w.-]*)", term)
        if not m:
            return None
        key, op, value = m.groups()
        if op == "!=":
            selector["matchExpressions"].append({"key": key, "operator": "NotIn", "values": [value]})
        else:
            selector["matchLabels"][key] = value
    return selector


def pool_lifetime_problems(scaled, deployment, trainer_job, autoscalers, idle_timeout):
    """The ScaledObject sizes the worker Deployment while the trainer's Job has a pod and
    scales it to zero once it has none: minReplicaCount 0; every trigger reads 0 once the
    trainer is gone (a kubernetes-workload trigger on the trainer's pods alone, a prometheus
    one on this trainer's series with null values read as 0); the workload trigger keeps a
    worker before tandem_workers_wanted is known; the cooldown ends before a released,
    restarted worker gives up (--idle-timeout, exit 5); nothing else scales the Deployment."""
    spec, problems = scaled["spec"], []
    target = spec["scaleTargetRef"]
    if (target.get("kind", "Deployment"), target["name"]) != ("Deployment", deployment["metadata"]["name"]):
        problems.append(f"the ScaledObject scales {target}, not Deployment {deployment['metadata']['name']}")
    if spec.get("minReplicaCount", 0) != 0 or spec.get("idleReplicaCount", 0) != 0:
        problems.append(f"the pool never scales to zero: minReplicaCount {spec.get('minReplicaCount', 0)} "
                        f"(idleReplicaCount {spec.get('idleReplicaCount')}) keeps workers after the trainer is gone")
    if "maxReplicaCount" not in spec:
        problems.append("no maxReplicaCount: KEDA's default is 100 workers")
    if "replicas" in deployment["spec"]:
        problems.append(f"the Deployment writes replicas: {deployment['spec']['replicas']}: every `kubectl apply` "
                        "resets what the autoscaler chose")
    for other in autoscalers:
        problems.append(f"HorizontalPodAutoscaler {other['metadata']['name']} scales the workers too: two autoscalers "
                        "fight, and a plain HPA holds its last count when the trainer's metric disappears")
    trainer_labels = trainer_job["spec"]["template"].get("metadata", {}).get("labels", {})
    worker_labels = deployment["spec"]["template"]["metadata"].get("labels", {})
    trainer_name = trainer_job["metadata"]["name"]
    floor = None
    for trigger in spec["triggers"]:
        kind, meta = trigger["type"], trigger["metadata"]
        if kind == "kubernetes-workload":
            selector = equality_selector(meta.get("podSelector", ""))
            if selector is None:
                problems.append(f"kubernetes-workload podSelector {meta.get('podSelector')!r}: write it as key=value")
                continue
            if not selects(selector, trainer_labels):
                problems.append(f"the kubernetes-workload trigger ({meta['podSelector']}) selects no trainer pod "
                                f"(labels {trainer_labels})")
                continue
            if selects(selector, worker_labels):
                problems.append(f"the kubernetes-workload trigger ({meta['podSelector']}) counts the workers too: "
                                "the pool would keep itself alive")
                continue
            value = float(meta.get("value", "0"))
            if value > 0 and float(meta.get("activationValue", "0")) < 1:
                floor = -(-1 // value)  # workers per trainer pod: ceil(1 / value)
        elif kind == "prometheus":
            query = meta.get("query", "")
            if "tandem_workers_wanted" not in query:
                problems.append(f"the prometheus trigger reads {query!r}, not tandem_workers_wanted")
            elif trainer_name not in query:
                problems.append(f"the prometheus query {query!r} reads every trainer Prometheus scrapes: restrict it "
                                f"to this Job's pods ({trainer_name}-...), or another job keeps this pool alive")
            if meta.get("threshold") != "1" or trigger.get("metricType", "AverageValue") != "AverageValue":
                problems.append(f"the prometheus trigger's target ({trigger.get('metricType', 'AverageValue')} "
                                f"{meta.get('threshold')}) is not AverageValue 1: the replicas would not be the "
                                "trainer's tandem_workers_wanted")
            if meta.get("ignoreNullValues", "true").lower() in ("false", "f", "0"):
                problems.append("ignoreNullValues false: once the trainer is gone its query errors instead of reading "
                                "0, and the pool is not scaled to zero")
        else:
            problems.append(f"a {kind} trigger: it does not read 0 when the trainer is gone, so the pool would not "
                            "scale to zero")
    if floor is None:
        problems.append("no kubernetes-workload trigger on the trainer's pods: nothing keeps a worker while "
                        "tandem_workers_wanted is unknown (NaN until a worker's capacity is), so the trainer waits "
                        "for workers that never come")
    cooldown = spec.get("cooldownPeriod", 300)
    if cooldown >= idle_timeout:
        problems.append(f"cooldownPeriod {cooldown} is not under the workers' --idle-timeout {idle_timeout:g}: "
                        "restarted workers whose trainer has gone exit 5 and crash-loop before the pool is "
                        "scaled to zero")
    if trainer_job["spec"].get("activeDeadlineSeconds") is None:
        problems.append("the trainer's Job has no activeDeadlineSeconds: a hung trainer (and its pool) runs forever")
    return problems
