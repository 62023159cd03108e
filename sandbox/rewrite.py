"""The rewrites checker.compile_action applies to checked model code before compiling it: size guards
around the operations that can build something huge in one C call, and budget checks at every loop
iteration and function entry. Each inserted call names a helper of guards.py (`_arith`, ...) or a
check the worker binds for each run (`_tick`, ...): a name the checker forbids model code to write,
so the code can neither call, rebind nor shadow it. Every inserted node carries the line of the
model's code it guards, so errors and stops report the model's own lines.

    tree = rewrite.rewrite(checked_tree)
"""

import ast
import copy


def rewrite(tree: ast.Module) -> ast.Module:
    """`tree` with the guards and the budget checks in place (changed in place, and returned)."""
    return ast.fix_missing_locations(Budget().visit(Guard().visit(tree)))


_GUARDED_OPS = {ast.Mult: "*", ast.Pow: "**", ast.LShift: "<<", ast.Add: "+", ast.Sub: "-", ast.Mod: "%"}


class Guard(ast.NodeTransformer):
    """Routes the size-amplifying operations through the helpers above and drops annotations
    (they would be evaluated at definition time, outside any budget)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        op = _GUARDED_OPS.get(type(node.op))
        return node if op is None else _call("_arith", node, ast.Constant(op), node.left, node.right)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        op = _GUARDED_OPS.get(type(node.op))
        if op is not None:  # the target's subexpressions are evaluated twice; harmless for game code
            current = copy.deepcopy(node.target)
            current.ctx = ast.Load()
            node.value = _call("_aug", node, ast.Constant(op), current, node.value)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr in ("join", "replace"):
            return _call("_sized_method", node, node.value, ast.Constant(node.attr))
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        node.value = _call("_text", node.value, node.value)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.returns = None
        return node


class Budget(ast.NodeTransformer):
    """Puts `_tick()` at the top of every loop body and in front of every comprehension's filters,
    wraps every def's body in `_enter()` ... `try: ... finally: _leave()` and every lambda in
    `_budgeted`. The checks carry the loop's or def's line, so a stop reports the model's own line."""

    def visit_loop(self, node: ast.For | ast.While) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(ast.Expr(_call("_tick", node)), node))
        return node

    visit_For = visit_While = visit_loop

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        node.ifs.insert(0, _call("_tick", node.iter))  # _tick() returns True
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        leave = ast.copy_location(ast.Expr(_call("_leave", node)), node)
        guarded = ast.copy_location(ast.Try(body=node.body, handlers=[], orelse=[], finalbody=[leave]), node)
        node.body = [ast.copy_location(ast.Expr(_call("_enter", node)), node), guarded]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        return _call("_budgeted", node, node)


def _call(helper: str, where: ast.AST, *args: ast.expr) -> ast.Call:
    return ast.copy_location(ast.Call(ast.Name(helper, ast.Load()), list(args), []), where)
