"""jaxprc.tree_util: JAX's pytree functions over jaxprc's private registry."""
from jaxprc.ir.tree_util import *  # noqa: F401,F403
from jaxprc.ir.tree_util import (KeyEntry, KeyPath, default_registry, flatten_one_level,  # noqa: F401
                                 flatten_one_level_with_keys, is_tree_node, register_pytree_with_keys_class,
                                 register_static, tree_broadcast, tree_reduce_associative)
from jaxprc.ir.tree_util import (Partial, PyTreeDef, all_leaves, keystr, register_dataclass,  # noqa: F401
                                 register_pytree_node, register_pytree_node_class,
                                 register_pytree_with_keys, tree_all, tree_flatten,
                                 tree_flatten_with_path, tree_leaves, tree_leaves_with_path, tree_map,
                                 tree_map_with_path, tree_reduce, tree_structure, tree_transpose,
                                 tree_unflatten, treedef_children, treedef_is_leaf, treedef_tuple)
