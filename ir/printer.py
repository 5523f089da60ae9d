"""Temporary minimal printer (replaced by the full text form)."""
def pp_eqn(eqn):
    return f"{[v.aval.str_short() for v in eqn.outvars]} = {eqn.primitive.name}[{eqn.params}] {eqn.invars}"
def pp_jaxpr(cj, show_consts=True):
    j = cj.jaxpr
    return "{ lambda ; " + " ".join(v.aval.str_short() for v in j.invars) + " let\n" + "\n".join("  " + pp_eqn(e) for e in j.eqns) + "\n}"
