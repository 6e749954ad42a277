"""obnamlib.cli.settings: value types, the registry, the --dump-config text."""

import pytest

from obnamlib.cli import settings as s


@pytest.mark.parametrize('text, size', [
    ('0', 0), ('1024', 1024), ('64Ki', 65536), ('64ki', 65536),
    ('1.5 MB', 1500000), ('2gib', 2 * 2 ** 30), ('10 k', 10000),
    ('1.5Ti', int(1.5 * 2 ** 40)), ('7b', 7), ('3 KiB ', 3072),
    ('nonsense', 0), ('', 0), ('-1', 0), ('1e3', 0), ('5 kb extra', 0),
    ('9' * 400 + '.5', 0), ('9' * 400 + ' ki', 0),
])
def test_byte_sizes(text, size):
    assert s.parse_byte_size(text) == size


@pytest.mark.parametrize('text, items', [
    ('a, b', ['a', 'b']),
    ('one, "two,three",', ['one', 'two,three']),
    ('a,,b', ['a', '', 'b']),
    ('a, ', ['a', '']),
    ('"x,y" , z', ['x,y', 'z']),
    ('"open,quote', ['open,quote']),
    ('one\ntwo', ['one\ntwo']),
    ('', []),
])
def test_list_text(text, items):
    assert s.split_list_text(text) == items


@pytest.mark.parametrize('word, value', [
    ('yes', True), ('On', True), ('TRUE', True), ('1', True),
    ('no', False), ('maybe', False), ('', False), ('0', False),
    (True, True), (0, False), (2, True), (None, False),
])
def test_boolean_words(word, value):
    b = s.BooleanSetting(['b'], False, 'help')
    b.value = word
    assert b.value is value


def registry():
    reg = s.Settings()
    reg.string_list(['exclude'], 'help')
    reg.integer(['count', 'c'], 'help', default=3)
    reg.choice(['mode'], ['fast', 'slow'], 'help')
    reg.boolean(['pretend', 'dry-run'], 'help')
    reg.bytesize(['size'], 'help', default=1024)
    reg.string(['name'], 'help', default=None)
    return reg


def test_framework_settings_come_first_then_registration_order():
    assert registry().keys() == [
        'output', 'log', 'log-level', 'log-max', 'log-keep', 'log-mode',
        'dump-memory-profile', 'memory-dump-interval', 'exclude', 'count',
        'mode', 'pretend', 'size', 'name']


def test_aliases_share_one_value():
    reg = registry()
    reg['dry-run'] = 'yes'
    assert reg['pretend'] is True
    assert reg.setting('c') is reg.setting('count')


def test_command_line_list_replaces_default_and_file_then_appends():
    reg = s.Settings()
    reg.string_list(['exclude'], 'help', default=['d'])
    item = reg.setting('exclude')
    item.set_from_command_line('x')
    item.set_from_command_line('y')
    assert reg['exclude'] == ['x', 'y']
    reg.set_from_ini('f.conf', 'exclude', 'a, b')
    assert reg['exclude'] == ['a', 'b']
    item.set_from_command_line('z')
    assert reg['exclude'] == ['z']


def test_file_values_are_checked_when_read():
    reg = registry()
    with pytest.raises(s.NotAnInteger) as e:
        reg.set_from_ini('f.conf', 'c', 'soon')
    assert str(e.value) == 'f.conf: count: not an integer: soon'
    with pytest.raises(s.NotAChoice) as e:
        reg.set_from_yaml('f.yaml', 'mode', 'medium')
    assert str(e.value) == 'f.yaml: mode = medium is not one of fast, slow'
    with pytest.raises(s.UnknownConfigVariable) as e:
        reg.set_from_ini('f.conf', 'frob', '1')
    assert str(e.value) == 'f.conf: Unknown configuration variable frob'


def test_yaml_values_keep_their_types_where_1x_did():
    reg = registry()
    reg.set_from_yaml('f.yaml', 'exclude', 'a, b')
    reg.set_from_yaml('f.yaml', 'size', 4096)
    reg.set_from_yaml('f.yaml', 'count', 7)
    assert (reg['exclude'], reg['size'], reg['count']) == (['a, b'], 4096, 7)


def test_yaml_scalars_for_strings_are_their_text():
    import datetime
    reg = registry()
    for obj, text in ((12, '12'), (1.5, '1.5'), (True, 'True'),
                      (datetime.datetime(2015, 6, 1, 10), '2015-06-01 10:00:00'),
                      (None, None), ('x', 'x')):
        reg.set_from_yaml('f.yaml', 'name', obj)
        assert reg['name'] == text


def test_yaml_lists_are_lists_of_text():
    reg = registry()
    for obj, items in (([1, 'a'], ['1', 'a']), (5, ['5']), (None, []),
                       ('a, b', ['a, b'])):
        reg.set_from_yaml('f.yaml', 'exclude', obj)
        assert reg['exclude'] == items


def test_yaml_numbers_for_choices_and_sizes():
    """`repository-format: 6` is the word 6; a size YAML read as a float
    or anything else is parsed as text, so it cannot fail later."""
    reg = registry()
    reg.choice(['format'], ['6', 'ga'], 'help')
    reg.set_from_yaml('f.yaml', 'format', 6)
    assert reg['format'] == '6'
    with pytest.raises(s.NotAChoice) as e:
        reg.set_from_yaml('f.yaml', 'format', 7)
    assert str(e.value) == 'f.yaml: format = 7 is not one of 6, ga'
    for obj, size in ((1.5, 1), ('1.5k', 1500), ([1], 0), (None, 0)):
        reg.set_from_yaml('f.yaml', 'size', obj)
        assert reg['size'] == size


def test_require():
    reg = registry()
    reg.require('count', 'mode')
    with pytest.raises(s.RequiredSettingMissing) as e:
        reg.require('count', 'exclude')
    assert str(e.value) == \
        'R39951X: Setting exclude has no value, but one is required'


def test_config_text():
    reg = registry()
    reg['exclude'] = ['a,b', 'c', '100%']
    reg['name'] = 'two\nlines'
    reg.add_other_section('other', {'k': 'v\nw', 'n': 5})
    text = reg.config_text()
    assert text.startswith('[config]\noutput = \nlog = \nlog-level = debug\n')
    assert text.endswith(
        'exclude = "a,b", c, 100%\ncount = 3\nmode = fast\npretend = False\n'
        'size = 1024\nname = two\n\tlines\n\n[other]\nk = v\n\tw\nn = 5\n\n')
