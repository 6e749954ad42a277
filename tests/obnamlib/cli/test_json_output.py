"""The conventions every command's JSON output shares."""

import io
import json

from obnamlib.cli import json_output
from obnamlib.cli import ui as ui_module


def test_utf8_name_is_plain_string():
    assert json_output.name_fields('path', 'caf\u00e9'.encode()) == {
        'path': 'caf\u00e9'}


def test_non_utf8_name_keeps_exact_bytes_in_b64():
    fields = json_output.name_fields('path', b'/a\xe9')
    assert fields == {'path': '/a\ufffd', 'path_b64': 'L2Hp'}


def test_surrogate_escaped_str_name_is_its_bytes():
    fields = json_output.name_fields('path', '/a\udce9')
    assert fields['path_b64'] == 'L2Hp'


def test_time_fields_epoch_and_utc():
    assert json_output.time_fields('started', 0) == {
        'started': 0, 'started_utc': '1970-01-01T00:00:00Z'}
    assert json_output.time_fields('ended', None) == {
        'ended': None, 'ended_utc': None}


def test_document_is_ascii_and_ends_in_newline():
    out = io.StringIO()
    json_output.write(out, {'name': 'caf\u00e9'})
    text = out.getvalue()
    assert text.endswith('}\n')
    assert text.isascii()
    assert json.loads(text) == {'name': 'caf\u00e9'}


def notices_of(output_format, quiet=False):
    user = ui_module.UserInterface(quiet=quiet, stdout=io.StringIO(),
                                   stderr=io.StringIO())
    notify = json_output.notices(user, {'output-format': output_format})
    notify('a notice')
    return user.stdout.getvalue(), user.stderr.getvalue()


def test_notices_go_to_stdout_as_text_and_to_stderr_beside_json():
    assert notices_of('text') == ('a notice\n', '')
    assert notices_of('json') == ('', 'a notice\n')


def test_quiet_silences_notices_also_beside_json():
    assert notices_of('text', quiet=True) == ('', '')
    assert notices_of('json', quiet=True) == ('', '')


def test_a_time_beyond_the_calendar_keeps_its_number_without_utc():
    """A damaged or hostile repository may store any number."""
    assert json_output.time_fields('mtime', 2 ** 70) == {
        'mtime': 2 ** 70, 'mtime_utc': None}
