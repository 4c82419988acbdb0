"""Megatron-LM's command-line flags, read from megatron/training/arguments.py and the config dataclasses its
ArgumentGroupFactory turns into flags (argument_utils.py's rules: --name, bools defaulting True as --no-/--disable-,
argparse_meta arg_names overriding)."""
import ast, subprocess, sys, re
REPO = sys.argv[1]
def show(p): return subprocess.run(["git","-C",REPO,"show",f"HEAD:{p}"],capture_output=True,text=True).stdout
files = subprocess.run(["git","-C",REPO,"ls-tree","-r","HEAD","--name-only","megatron"],capture_output=True,text=True).stdout.split()
classes = {}
for f in files:
    if not f.endswith(".py"): continue
    try: tree = ast.parse(show(f))
    except SyntaxError: continue
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef): classes.setdefault(n.name, n)
src = show("megatron/training/arguments.py")
tree = ast.parse(src)
flags = set()
for n in ast.walk(tree):
    if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument":
        for a in n.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                flags.add(a.value)
def fields(cls, seen=()):
    node = classes.get(cls)
    if node is None: return []
    out = []
    for b in node.bases:
        name = getattr(b, "id", getattr(b, "attr", None))
        if name: out += fields(name)
    for s in node.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            out.append(s)
    return out
for n in ast.walk(tree):
    if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ArgumentGroupFactory":
        cls = n.args[0].id
        exclude = set()
        for kw in n.keywords:
            if kw.arg == "exclude":
                v = kw.value
                if isinstance(v, ast.Name):  # a list assigned just before
                    for m in ast.walk(tree):
                        if isinstance(m, ast.Assign) and getattr(m.targets[0], "id", "") == v.id:
                            exclude |= {e.value for e in m.value.elts}
                else:
                    exclude |= {e.value for e in v.elts}
        for s in fields(cls):
            name = s.target.id
            if name in exclude or name.startswith("_"): continue
            text = ast.unparse(s)
            if "init=False" in text: continue
            meta = re.search(r"'arg_names':\s*\[([^\]]*)\]", text)
            if meta:
                flags |= set(re.findall(r"'(--[^']+)'", meta.group(1))); continue
            ann = ast.unparse(s.annotation)
            default = ast.unparse(s.value) if s.value is not None else ""
            if ann in ("bool", "Optional[bool]") and (default == "True" or "default=True" in default):
                flags |= {"--no-" + name.replace("_","-"), "--disable-" + name.replace("_","-")}
            else:
                flags.add("--" + name.replace("_","-"))
print("\n".join(sorted(flags)))
