-- Headless Neovim with `tensorviz.recaptureOnSave = true` (docs/editors.md's setting),
-- driven step by step with the test (tests/editors/test_neovim.py), which has the graph's
-- viewer page open in Chromium meanwhile:
--   1. capture the spec's `net` (profile jax_example);
--   2. edit and save model.py (the graph is recaptured in the background);
--   3. report what Neovim saw (progress begun, URLs it was asked to open).
-- After step N the results go to $TV_DIR/stepN.json, and the script waits for the test's
-- $TV_DIR/goN before the next step. A failure goes to $TV_DIR/error.json.
local dir = assert(os.getenv("TV_DIR"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = { opened = {}, progress = {}, ended = 0 }

local function write_json(name, data)
  local tmp = dir .. "/" .. name .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(data))
  fh:close()
  os.rename(tmp, dir .. "/" .. name)
end

local function step(n)
  write_json("step" .. n .. ".json", result)
  assert(vim.wait(240000, function() return vim.uv.fs_stat(dir .. "/go" .. n) ~= nil end, 100),
    "the test never said go" .. n)
end

local function finish(err)
  if err then write_json("error.json", { error = err, result = result }) end
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    table.insert(result.opened, url)
    return { wait = function() return { code = 0 } end }, nil
  end
  local progress = vim.lsp.handlers["$/progress"]
  vim.lsp.handlers["$/progress"] = function(e, params, ctx)
    local v = params.value or {}
    if v.kind == "begin" then table.insert(result.progress, { title = v.title, message = v.message }) end
    if v.kind == "end" then result.ended = result.ended + 1 end
    return progress(e, params, ctx)
  end

  vim.cmd.edit(ws .. "/model.py")
  local model = vim.api.nvim_get_current_buf()
  local id = assert(vim.lsp.start({
    name = "tensorviz", cmd = cmd, root_dir = ws,
    settings = { tensorviz = { recaptureOnSave = true } },
  }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")

  local function run(command, args, timeout)
    local answered, answer, failure = false, nil, nil
    client:exec_cmd({ title = command, command = command, arguments = args }, { bufnr = model },
      function(e, res) answered, answer, failure = true, res, e end)
    assert(vim.wait(timeout or 150000, function() return answered end, 100), command .. " never answered")
    assert(failure == nil, command .. " failed: " .. vim.inspect(failure))
    return answer
  end
  run("tensorviz.trustWorkspace", {}, 30000)
  result.net = run("tensorviz.captureProfile", { "jax_example" })
  step(1)

  local lines = vim.api.nvim_buf_get_lines(model, 0, -1, false)
  for i, l in ipairs(lines) do
    if l:find("^    return ") then lines[i] = "    return jnp.exp(jnp.tanh(jax.nn.relu(x @ jnp.ones((3, 4)))))" end
  end
  vim.api.nvim_buf_set_lines(model, 0, -1, false, lines)
  vim.cmd("write")
  step(2)
  step(3)
end)
finish(not ok and tostring(err) or nil)
