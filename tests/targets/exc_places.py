"""One thread per place an exception can be handled (tests/test_exception_mode.py).

Each thread loops raising and handling its own exception class (named after
its place, E_<place>), and spends its time spinning at the place named by
its function p_<place>: in an except block; in a finally an exception
propagates through; in a finally after the exception was handled; in a
handler inside a generator, inside a function a generator expression calls,
inside a coroutine, inside a function a coroutine calls; in a handler around
nested generators that spin (yield from); in a handler around a chain of 1,
10 and 40 generators (yield from), none of which handles anything (each
pushes an empty item on the exception stack: the handler's exception is
still sys.exception() in the innermost, issue #38); a chain of generators
with no handler at all; and a thread that never raises.
argv: SECONDS. Prints "ready" once the threads run.
"""
import sys
import threading
import time


def spin(t=0.05):
    end = time.monotonic() + t
    while time.monotonic() < end:
        pass


class E_except(Exception): pass
class E_finally_propagating(Exception): pass
class E_finally_after_handled(Exception): pass
class E_generator(Exception): pass
class E_genexpr_callee(Exception): pass
class E_coroutine(Exception): pass
class E_coroutine_callee(Exception): pass
class E_outer_handler_nested_gens(Exception): pass
class E_gen_in_handler(Exception): pass
class E_nested_gens_10(Exception): pass
class E_nested_gens_40(Exception): pass


def p_except():
    while True:
        try:
            raise E_except()
        except E_except:
            spin()


def p_finally_propagating():
    while True:
        try:
            try:
                raise E_finally_propagating()
            finally:
                spin()
        except E_finally_propagating:
            pass


def p_finally_after_handled():
    while True:
        try:
            try:
                raise E_finally_after_handled()
            except E_finally_after_handled:
                pass
        finally:
            spin()


def gen_handler():
    while True:
        try:
            raise E_generator()
        except E_generator:
            spin()
        yield 1


def p_generator():
    for _ in gen_handler():
        pass


def handler_fn(cls):
    try:
        raise cls()
    except cls:
        spin()
    return 1


def p_genexpr_callee():
    while True:
        sum(handler_fn(E_genexpr_callee) for _ in range(3))


async def coro_handler():
    try:
        raise E_coroutine()
    except E_coroutine:
        spin()


async def coro_callee():
    handler_fn(E_coroutine_callee)


def run_coro(c):
    try:
        c.send(None)
    except StopIteration:
        pass


def p_coroutine():
    while True:
        run_coro(coro_handler())


def p_coroutine_callee():
    while True:
        run_coro(coro_callee())


def inner_gen():
    for i in range(3):
        spin()
        yield i


def outer_gen():
    yield from inner_gen()


def p_outer_handler_nested_gens():
    while True:
        try:
            raise E_outer_handler_nested_gens()
        except E_outer_handler_nested_gens:
            for _ in outer_gen():
                pass


def deep_gen(depth):
    if depth <= 1:
        spin()
        yield 1
    else:
        yield from deep_gen(depth - 1)


def handler_around(cls, depth):
    while True:
        try:
            raise cls()
        except cls:
            for _ in deep_gen(depth):
                pass


def p_gen_in_handler():
    handler_around(E_gen_in_handler, 1)


def p_nested_gens_10():
    handler_around(E_nested_gens_10, 10)


def p_nested_gens_40():
    handler_around(E_nested_gens_40, 40)


def p_gen_no_handler():
    while True:
        for _ in deep_gen(3):
            pass


def p_none():
    while True:
        spin()


PLACES = [p_except, p_finally_propagating, p_finally_after_handled, p_generator,
          p_genexpr_callee, p_coroutine, p_coroutine_callee, p_outer_handler_nested_gens,
          p_gen_in_handler, p_nested_gens_10, p_nested_gens_40, p_gen_no_handler, p_none]
for f in PLACES:
    threading.Thread(target=f, name=f.__name__[2:], daemon=True).start()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
