"""One torchvision transform at a time as tandem's step (_torchvision_native.translate):
each function reads the transform's attributes (v1 and v2 spell some differently) and gives
the step, or raises _Refused naming what tandem would have to approximate."""
from tandem._torchvision_native import _FLOAT, _UINT8, _Refused, _hw, _name, _value


_KEEP_SIZE = ("hflip", "vflip", "random_grayscale", "color_jitter", "gaussian_blur", "rotation", "trivial_augment_wide",
              "rand_augment", "auto_augment", "aug_mix", "random_erasing")


def _group(t, state, name, step):
    """RandomChoice (one of them, by weight) or RandomOrder: each transform one step that
    keeps the image's size."""
    steps = []
    for inner in t.transforms:
        made = step(inner, dict(state))
        if len(made) != 1 or made[0]["op"] not in _KEEP_SIZE:
            raise _Refused(f"{name} of {_name(inner)}: tandem chooses among steps that keep the image's size")
        steps.append(made[0])
    group = {"op": "random_choice" if name == "RandomChoice" else "random_order", "steps": steps}
    if name == "RandomChoice" and getattr(t, "p", None) is not None:
        group["p"] = [float(w) for w in t.p]
    return group


def _grayscale(t, p):
    if _name(t) == "Grayscale" and int(getattr(t, "num_output_channels", 1)) != 3:
        raise _Refused("Grayscale to 1 channel: tandem's images keep 3 (use num_output_channels=3)")
    return {"op": "random_grayscale", "p": p * float(getattr(t, "p", 1.0))}


_PAD_MODES = ("constant", "edge", "reflect", "symmetric")


def _random_crop(t, state):
    """RandomCrop: v1 keeps padding as given (n, [lr, tb] or [l, t, r, b]); v2 parses it to
    [left, right, top, bottom]."""
    h, w = _hw(t.size)
    pad = t.padding
    if pad is None:
        pad = [0, 0, 0, 0]
    elif isinstance(pad, int):
        pad = [pad] * 4
    elif type(t).__module__.startswith("torchvision.transforms.v2"):
        pad = [pad[0], pad[2], pad[1], pad[3]]
    else:
        pad = list(pad) * 2 if len(pad) == 2 else list(pad)
    fill = t.fill if not isinstance(t.fill, dict) else next(iter(t.fill.values()), 0)
    fill = fill if isinstance(fill, (int, float)) or fill is None else list(fill)
    if isinstance(fill, list):
        if len(set(fill)) != 1:
            raise _Refused("a fill per channel: tandem pads with one value")
        fill = fill[0]
    fill = float(fill or 0) * (255 if state["domain"] == _FLOAT else 1)
    mode = str(_value(t.padding_mode))
    if fill != int(fill) or not 0 <= fill <= 255 or mode not in _PAD_MODES:
        raise _Refused(f"fill {fill} or padding_mode {mode!r}: tandem pads with a byte, edge, reflect or symmetric")
    return {"op": "random_crop", "size": h, "width": w, "padding_left": int(pad[0]), "padding_top": int(pad[1]),
            "padding_right": int(pad[2]), "padding_bottom": int(pad[3]), "pad_if_needed": int(bool(t.pad_if_needed)),
            "fill": int(fill), "padding_mode": mode}


def _color_jitter(t, p):
    step = {"op": "color_jitter", "p": p}
    for field in ("brightness", "contrast", "saturation", "hue"):
        given = getattr(t, field)
        if given is None:
            continue
        lo, hi = float(given[0]), float(given[1])
        centre = 0.0 if field == "hue" else 1.0
        amount = round(hi - centre, 9)
        if abs(lo - (max(0.0, centre - amount) if field != "hue" else -amount)) > 1e-9:
            raise _Refused(f"{field} range ({lo}, {hi}) is not {centre} +- one amount: tandem's are")
        step[field] = amount
    return step


def _gaussian_blur(t, p):
    kx, ky = (int(k) for k in t.kernel_size)
    if kx != ky:
        raise _Refused(f"kernel {kx}x{ky}: tandem's is square")
    sigma = [float(s) for s in t.sigma]
    return {"op": "gaussian_blur", "kernel_size": kx, "sigma_min": sigma[0], "sigma_max": sigma[-1], "p": p}


def _rotation(t):
    lo, hi = (float(d) for d in t.degrees)
    if lo != -hi or _value(t.interpolation) not in ("nearest", 0) or t.expand or t.center is not None \
            or t.fill not in (0, None, [0], [0.0], 0.0):
        raise _Refused("only RandomRotation(d) about the centre, nearest, fill 0, not expanded, is tandem's")
    return {"op": "rotation", "degrees": hi}


def _plain_fill(t, mode):
    if _value(t.interpolation) != mode or getattr(t, "fill", None) not in (None, 0, [0], 0.0):
        raise _Refused(f"interpolation or fill other than {mode} and 0")


def _auto_augment(t, name):
    if name == "TrivialAugmentWide":
        _plain_fill(t, "nearest")
        return [{"op": "trivial_augment_wide", "num_magnitude_bins": int(t.num_magnitude_bins)}]
    if name == "RandAugment":
        _plain_fill(t, "nearest")
        return [{"op": "rand_augment", "num_ops": int(t.num_ops), "magnitude": int(t.magnitude),
                 "num_magnitude_bins": int(t.num_magnitude_bins)}]
    if name == "AutoAugment":
        _plain_fill(t, "nearest")
        return [{"op": "auto_augment", "policy": str(_value(t.policy))}]
    if name == "AugMix":
        _plain_fill(t, "bilinear")
        if not t.all_ops:
            raise _Refused("all_ops=False: tandem's AugMix uses every operation")
        return [{"op": "aug_mix", "severity": int(t.severity), "mixture_width": int(t.mixture_width),
                 "chain_depth": int(t.chain_depth), "alpha": float(t.alpha)}]
    return None


def _erasing(t, state, name):
    if name != "RandomErasing":
        raise _Refused("tandem has no such step")
    value = t.value
    if isinstance(value, (list, tuple)):
        if len(set(float(v) for v in value)) != 1:
            raise _Refused("a value per channel: tandem erases with one")
        value = value[0]
    if isinstance(value, str) or value is None:
        raise _Refused("random values: tandem erases with one value")
    if state["domain"] == _FLOAT:
        value = round(float(value) * 255)
    elif state["domain"] != _UINT8:
        raise _Refused(f"erasing a {state['domain']}")
    return [{"op": "random_erasing", "p": float(t.p), "scale_min": float(t.scale[0]), "scale_max": float(t.scale[1]),
             "ratio_min": float(t.ratio[0]), "ratio_max": float(t.ratio[1]), "value": int(value)}]
